package tracing

import (
	"context"
	"errors"
	"io"
	"maps"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/tracing/internal/otelrpc"
)

// ClientStream returns a client stream interceptor: a client span per
// stream, from NewStream to the stream's end (RecvMsg returning an error,
// io.EOF for a clean end, or its context ending), with the messages sent
// and received; the span's context goes to the server with the open.
func ClientStream(opts ...Option) client.StreamInterceptor {
	cfg := otelrpc.NewConfig(opts)
	tr := cfg.TP.Tracer(ScopeName)
	return func(ctx context.Context, m *client.Method, final proto.Struct, next client.StreamOpener) (client.Stream, error) {
		ctx, span := tr.Start(ctx, otelrpc.SpanName(m.Service, m.Name),
			trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(otelrpc.AttrSystem.String("apache_thrift"), otelrpc.AttrService.String(m.Service),
				otelrpc.AttrMethod.String(m.Name), otelrpc.AttrStreamMode.String(m.Stream.String())))
		old, _ := metadata.FromOutgoingContext(ctx)
		md := make(metadata.MD, len(old)+2)
		maps.Copy(md, old)
		cfg.Prop.Inject(ctx, otelrpc.Carrier(md))
		if md[metadata.RequestIDKey] == "" {
			md[metadata.RequestIDKey] = metadata.NewRequestID()
		}
		span.SetAttributes(otelrpc.AttrRequestID.String(md[metadata.RequestIDKey]))
		st, err := next(metadata.NewOutgoingContext(ctx, md), m, final)
		if err != nil {
			otelrpc.Record(span, err)
			span.End()
			return nil, err
		}
		ts := &tracedStream{Stream: st, span: span}
		ts.stop = context.AfterFunc(st.Context(), func() { ts.end(context.Cause(st.Context())) })
		return ts, nil
	}
}

// tracedStream counts a stream's messages and ends its span once.
type tracedStream struct {
	client.Stream
	span           trace.Span
	stop           func() bool
	sent, received atomic.Int64
	once           sync.Once
}

func (s *tracedStream) SendMsg(m proto.Struct) error {
	err := s.Stream.SendMsg(m)
	if err == nil {
		s.sent.Add(1)
	}
	return err
}

func (s *tracedStream) RecvMsg(m proto.Struct) error {
	err := s.Stream.RecvMsg(m)
	if err == nil {
		s.received.Add(1)
		return nil
	}
	s.stop()
	s.end(err)
	return err
}

func (s *tracedStream) end(err error) {
	s.once.Do(func() {
		s.span.SetAttributes(otelrpc.AttrSent.Int64(s.sent.Load()), otelrpc.AttrReceived.Int64(s.received.Load()))
		if !errors.Is(err, io.EOF) {
			otelrpc.Record(s.span, err)
		}
		s.span.End()
	})
}
