// Package tracingserver is the OpenTelemetry server interceptor of
// pkg/tracing, apart so that a client that traces links no server code.
package tracingserver

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/tracing"
	"github.com/hatrpc/hatrpc/pkg/tracing/internal/otelrpc"
)

// Server returns a server interceptor; give it first to
// server.WithInterceptors so its span covers the others. It takes the
// options of pkg/tracing (tracing.WithTracerProvider, ...).
func Server(opts ...tracing.Option) server.Interceptor {
	cfg := otelrpc.NewConfig(opts)
	tr := cfg.TP.Tracer(otelrpc.ScopeName)
	return func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		ctx = cfg.Prop.Extract(ctx, otelrpc.Carrier(md))
		attrs := []attribute.KeyValue{otelrpc.AttrSystem.String("apache_thrift"), otelrpc.AttrService.String(info.Service),
			otelrpc.AttrMethod.String(info.Method.Name), otelrpc.AttrTransport.String(info.Transport)}
		if id := md[metadata.RequestIDKey]; id != "" {
			attrs = append(attrs, otelrpc.AttrRequestID.String(id))
		}
		ctx, span := tr.Start(ctx, otelrpc.SpanName(info.Service, info.Method.Name),
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		res, err := next(ctx, args)
		otelrpc.Record(span, err)
		return res, err
	}
}
