// Package tracing provides OpenTelemetry interceptors for HatRPC clients;
// its subpackage tracingserver has the server's, so a client that traces
// links no server code. The client interceptor starts a client span per
// call and injects its context into the call's outgoing headers (W3C
// traceparent and tracestate by default, through the configured
// propagator); the server interceptor extracts it from the incoming
// headers and starts the server span as its child. Headers travel in
// THeader info headers and in the HatRPC frame's header block
// (pkg/metadata), on TCP, lanes and FLOCK; calls on plain framed/unframed
// Thrift connections carry none, so their server spans start new traces.
// Kept out of pkg/client and pkg/server so the core does not depend on
// OpenTelemetry.
package tracing

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/tracing/internal/otelrpc"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = otelrpc.ScopeName

// Option configures an interceptor, the client's here or the server's
// (tracingserver.Server).
type Option = otelrpc.Option

// WithTracerProvider uses tp instead of otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *otelrpc.Config) { c.TP = tp }
}

// WithPropagator uses p instead of W3C trace context and baggage.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *otelrpc.Config) { c.Prop = p }
}

// Client returns a client interceptor; give it first to
// client.WithInterceptors so its span covers the others.
func Client(opts ...Option) client.Interceptor {
	cfg := otelrpc.NewConfig(opts)
	tr := cfg.TP.Tracer(ScopeName)
	return func(ctx context.Context, m *client.Method, args, result proto.Struct, next client.Invoker) error {
		ctx, span := tr.Start(ctx, otelrpc.SpanName(m.Service, m.Name),
			trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(otelrpc.AttrSystem.String("apache_thrift"), otelrpc.AttrService.String(m.Service), otelrpc.AttrMethod.String(m.Name)))
		defer span.End()
		old, _ := metadata.FromOutgoingContext(ctx)
		md := make(metadata.MD, len(old)+2)
		maps.Copy(md, old)
		cfg.Prop.Inject(ctx, otelrpc.Carrier(md))
		if md[metadata.RequestIDKey] == "" {
			// Set here rather than by the Conn so the client span
			// records the id the server logs.
			md[metadata.RequestIDKey] = metadata.NewRequestID()
		}
		span.SetAttributes(otelrpc.AttrRequestID.String(md[metadata.RequestIDKey]))
		err := next(metadata.NewOutgoingContext(ctx, md), m, args, result)
		otelrpc.Record(span, err)
		return err
	}
}
