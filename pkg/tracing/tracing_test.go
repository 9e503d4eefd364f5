package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/tracing"
	"github.com/hatrpc/hatrpc/pkg/tracing/tracingserver"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs the echo service with the server interceptor (plus one that
// reports the request id the handler sees).
func serve(t *testing.T, tp trace.TracerProvider, ids chan<- string, opts ...server.Option) string {
	t.Helper()
	e := wiretest.NewEcho()
	seeID := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		ids <- metadata.RequestID(ctx)
		return next(ctx, args)
	}
	s := server.New(append([]server.Option{server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		server.WithInterceptors(tracingserver.Server(tracing.WithTracerProvider(tp)), seeID)}, opts...)...)
	s.Register(e.Service())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		select {
		case <-done:
		case <-time.After(testenv.HangGuard(5 * time.Second)):
			t.Error("Serve did not return")
		}
	})
	return ln.Addr().String()
}

// A traced call gives a client span and a server span of one trace, the
// server span the client span's child, over HatRPC framing and THeader.
func TestLinkedTrace(t *testing.T) {
	cases := []struct {
		name      string
		opts      []client.Option
		srvOpts   []server.Option
		mode      int32
		transport string
		status    codes.Code
	}{
		{"tcp", []client.Option{client.WithRDMA("off")}, nil, wiretest.ModeEcho, server.TransportTCP, codes.Unset},
		{"theader", []client.Option{client.WithTHeader()}, nil, wiretest.ModeEcho, server.TransportThrift, codes.Unset},
		{"tcp-exception", []client.Option{client.WithRDMA("off")}, nil, wiretest.ModeAppExc, server.TransportTCP, codes.Error},
		{"lane", nil, []server.Option{server.WithRDMA(fastpathtest.Provider())}, wiretest.ModeEcho, fastpathtest.Transport(), codes.Unset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
			ids := make(chan string, 4)
			addr := serve(t, tp, ids, tc.srvOpts...)

			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
			defer cancel()
			c, err := client.Dial(ctx, addr, append(tc.opts, client.WithInterceptors(tracing.Client(tracing.WithTracerProvider(tp))))...)
			require.NoError(t, err)
			defer c.Close()
			var res wiretest.EchoResult
			err = c.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "traced", Mode: tc.mode}, &res)
			if tc.status == codes.Error {
				require.ErrorAs(t, err, new(*proto.ApplicationException))
			} else {
				require.NoError(t, err)
			}
			var rid string
			select {
			case rid = <-ids:
			case <-time.After(testenv.HangGuard(10 * time.Second)):
				t.Fatal("handler not reached")
			}
			require.NoError(t, c.Close())

			spans := exp.GetSpans()
			require.Len(t, spans, 2)
			byKind := map[trace.SpanKind]tracetest.SpanStub{}
			for _, s := range spans {
				byKind[s.SpanKind] = s
			}
			cs, ss := byKind[trace.SpanKindClient], byKind[trace.SpanKindServer]
			require.Equal(t, "Echo/echo", cs.Name)
			require.Equal(t, "Echo/echo", ss.Name)
			require.True(t, cs.SpanContext.IsValid())
			require.Equal(t, cs.SpanContext.TraceID(), ss.SpanContext.TraceID(), "one trace")
			require.Equal(t, cs.SpanContext.SpanID(), ss.Parent.SpanID(), "server span is the client span's child")
			require.True(t, ss.Parent.IsRemote())
			require.False(t, cs.Parent.IsValid(), "client span is the root")
			require.Regexp(t, "^[0-9a-f]{16}$", rid)
			attrs := map[string]string{}
			for _, kv := range ss.Attributes {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			require.Equal(t, tc.transport, attrs["hatrpc.transport"])
			require.Equal(t, rid, attrs["hatrpc.request_id"])
			require.Equal(t, tc.status, ss.Status.Code)
			require.Equal(t, tc.status, cs.Status.Code)
		})
	}
}

// Without a propagated context (a caller that does not trace) the server
// span starts its own trace.
func TestServerSpanWithoutParent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	ids := make(chan string, 4)
	addr := serve(t, tp, ids)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithRDMA("off"))
	require.NoError(t, err)
	defer c.Close()
	var res wiretest.EchoResult
	require.NoError(t, c.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "x"}, &res))
	<-ids
	require.NoError(t, c.Close())
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	require.Equal(t, trace.SpanKindServer, spans[0].SpanKind)
	require.False(t, spans[0].Parent.IsValid())
}
