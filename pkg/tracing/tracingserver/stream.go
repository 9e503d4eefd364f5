package tracingserver

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/tracing"
	"github.com/hatrpc/hatrpc/pkg/tracing/internal/otelrpc"
)

// ServerStream returns a server stream interceptor: a server span per
// stream around its handler, the child of the client's span when the
// open carried its context, with the messages received and sent.
func ServerStream(opts ...tracing.Option) server.StreamInterceptor {
	cfg := otelrpc.NewConfig(opts)
	tr := cfg.TP.Tracer(otelrpc.ScopeName)
	return func(ctx context.Context, info *server.StreamInfo, ss server.ServerStream, next server.StreamHandler) (proto.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		ctx = cfg.Prop.Extract(ctx, otelrpc.Carrier(md))
		attrs := []attribute.KeyValue{otelrpc.AttrSystem.String("apache_thrift"), otelrpc.AttrService.String(info.Service),
			otelrpc.AttrMethod.String(info.Method.Name), otelrpc.AttrTransport.String(server.TransportTCP),
			otelrpc.AttrStreamMode.String(info.Method.Stream.String())}
		if id := md[metadata.RequestIDKey]; id != "" {
			attrs = append(attrs, otelrpc.AttrRequestID.String(id))
		}
		ctx, span := tr.Start(ctx, otelrpc.SpanName(info.Service, info.Method.Name),
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		cs := &countedStream{ServerStream: ss, ctx: ctx}
		final, err := next(ctx, cs)
		span.SetAttributes(otelrpc.AttrSent.Int64(cs.sent.Load()), otelrpc.AttrReceived.Int64(cs.received.Load()))
		otelrpc.Record(span, err)
		return final, err
	}
}

// countedStream counts a server stream's messages; its context carries
// the span.
type countedStream struct {
	server.ServerStream
	ctx            context.Context
	sent, received atomic.Int64
}

func (s *countedStream) Context() context.Context { return s.ctx }

func (s *countedStream) SendMsg(m proto.Struct) error {
	err := s.ServerStream.SendMsg(m)
	if err == nil {
		s.sent.Add(1)
	}
	return err
}

func (s *countedStream) RecvMsg(m proto.Struct) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.received.Add(1)
	}
	return err
}
