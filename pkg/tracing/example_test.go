package tracing_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	echosvc "github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/examples/echo/gen/echo/echoserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hatrpctest"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/tracing"
	"github.com/hatrpc/hatrpc/pkg/tracing/tracingserver"
)

type echoer struct{}

func (echoer) Echo(_ context.Context, msg string) (string, error)    { return msg, nil }
func (echoer) EchoBytes(_ context.Context, b []byte) ([]byte, error) { return b, nil }

// The client and server interceptors make one trace of a call: a client
// span and its child, the server span, linked through the W3C trace
// context in the call's headers. Without WithTracerProvider they use
// OpenTelemetry's global provider.
func Example() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	l := hatrpctest.Listen()
	srv := server.New(server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		server.WithInterceptors(tracingserver.Server(tracing.WithTracerProvider(tp))))
	echoserver.RegisterEcho(srv, echoer{})
	go srv.Serve(l)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, l.Addr().String(), client.WithDialer(l.DialContext),
		client.WithInterceptors(tracing.Client(tracing.WithTracerProvider(tp))))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	if _, err := echosvc.NewEchoClient(conn).Echo(ctx, "traced"); err != nil {
		fmt.Println(err)
		return
	}

	spans := rec.Ended() // the server's span ends before the client's
	for _, s := range spans {
		fmt.Println(s.Name(), s.SpanKind())
	}
	fmt.Println("one trace:", spans[0].SpanContext().TraceID() == spans[1].SpanContext().TraceID(),
		"server span's parent is the client span:", spans[0].Parent().SpanID() == spans[1].SpanContext().SpanID())
	// Output:
	// Echo/echo server
	// Echo/echo client
	// one trace: true server span's parent is the client span: true
}
