package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/tracing"
	"github.com/hatrpc/hatrpc/pkg/tracing/tracingserver"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A traced stream gives one client span and one server span of one
// trace, each with the messages it saw each way.
func TestStreamTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	s := server.New(server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		server.WithStreamInterceptors(tracingserver.ServerStream(tracing.WithTracerProvider(tp))))
	s.Register(&server.Service{Name: "S", Methods: []server.Method{{
		Name: "echo", Stream: stream.Bidi,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			for {
				var a wiretest.EchoArgs
				if err := ss.RecvMsg(&a); err == io.EOF {
					return nil, nil
				} else if err != nil {
					return nil, err
				}
				for range 2 {
					if err := ss.SendMsg(&a); err != nil {
						return nil, err
					}
				}
			}
		},
	}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		s.Close()
		select {
		case <-done:
		case <-time.After(testenv.HangGuard(5 * time.Second)):
			t.Error("Serve did not return")
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, ln.Addr().String(), client.WithStreamInterceptors(tracing.ClientStream(tracing.WithTracerProvider(tp))))
	require.NoError(t, err)
	defer c.Close()
	st, err := c.NewStream(ctx, &client.Method{Service: "S", Name: "echo", Stream: stream.Bidi}, &wiretest.EchoResult{})
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "x"}))
	}
	require.NoError(t, st.CloseSend())
	for range 6 {
		require.NoError(t, st.RecvMsg(&wiretest.EchoArgs{}))
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	require.Eventually(t, func() bool { return len(exp.GetSpans()) == 2 }, testenv.HangGuard(time.Minute), time.Millisecond)

	byKind := map[trace.SpanKind]tracetest.SpanStub{}
	for _, sp := range exp.GetSpans() {
		byKind[sp.SpanKind] = sp
	}
	cs, ss := byKind[trace.SpanKindClient], byKind[trace.SpanKindServer]
	require.Equal(t, "S/echo", cs.Name)
	require.Equal(t, cs.SpanContext.TraceID(), ss.SpanContext.TraceID(), "one trace")
	require.Equal(t, cs.SpanContext.SpanID(), ss.Parent.SpanID())
	attrs := func(sp tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, kv := range sp.Attributes {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		return m
	}
	ca, sa := attrs(cs), attrs(ss)
	require.Equal(t, "bidirectional", ca["hatrpc.stream.mode"])
	require.Equal(t, "3", ca["hatrpc.stream.messages_sent"])
	require.Equal(t, "6", ca["hatrpc.stream.messages_received"])
	require.Equal(t, "3", sa["hatrpc.stream.messages_received"])
	require.Equal(t, "6", sa["hatrpc.stream.messages_sent"])
	require.Equal(t, ca["hatrpc.request_id"], sa["hatrpc.request_id"])
}
