package metadata_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	echosvc "github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/examples/echo/gen/echo/echoserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hatrpctest"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// Headers set on a context go with every call made with it; later values
// win.
func ExampleAppendToOutgoingContext() {
	ctx := metadata.AppendToOutgoingContext(context.Background(), "tenant", "t1", "zone", "eu")
	ctx = metadata.AppendToOutgoingContext(ctx, "tenant", "t2")
	md, _ := metadata.FromOutgoingContext(ctx)
	fmt.Println(md["tenant"], md["zone"])
	// Output: t2 eu
}

// tenantEcho answers with the caller's tenant header and sets a reply
// header.
type tenantEcho struct{}

func (tenantEcho) Echo(ctx context.Context, msg string) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	metadata.SetReply(ctx, "served-by", "kv-1")
	return msg + " for " + md["tenant"] + ", with a request id: " + fmt.Sprint(metadata.RequestID(ctx) != ""), nil
}

func (tenantEcho) EchoBytes(_ context.Context, b []byte) ([]byte, error) { return b, nil }

// A client sends headers, the handler reads them (and the request id the
// client generated) and sets reply headers, which the client captures.
func ExampleFromIncomingContext() {
	l := hatrpctest.Listen()
	srv := server.New(server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	echoserver.RegisterEcho(srv, tenantEcho{})
	go srv.Serve(l)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, l.Addr().String(), client.WithDialer(l.DialContext))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	var reply metadata.MD
	call := metadata.CaptureReply(metadata.AppendToOutgoingContext(ctx, "tenant", "t1"), &reply)
	s, err := echosvc.NewEchoClient(conn).Echo(call, "hello")
	fmt.Println(s, err)
	fmt.Println(reply["served-by"])
	// Output:
	// hello for t1, with a request id: true <nil>
	// kv-1
}
