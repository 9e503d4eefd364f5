package fb303_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fb303"
	fbgen "github.com/hatrpc/hatrpc/pkg/fb303/gen/fb303"
	"github.com/hatrpc/hatrpc/pkg/hatrpctest"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// fb303 on a server beside its own services; any fb303 client (Apache's
// Python one, or the generated Go client here) asks it for the server's
// name, version, status and counters.
func ExampleRegister() {
	srv := server.New(server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	fb303.Register(srv, fb303.WithName("kv"), fb303.WithVersion("1.2.0"),
		fb303.WithCounters(func() map[string]int64 { return map[string]int64{"kv.keys": 42} }))
	l := hatrpctest.Listen()
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
	c := fbgen.NewFacebookServiceClient(conn)
	name, _ := c.GetName(ctx)
	version, _ := c.GetVersion(ctx)
	status, _ := c.GetStatus(ctx)
	keys, err := c.GetCounter(ctx, "kv.keys")
	fmt.Println(name, version, status, keys, err)
	// Output: kv 1.2.0 ALIVE 42 <nil>
}
