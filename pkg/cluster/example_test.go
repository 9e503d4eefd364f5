package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/cluster"
)

// A generated client over three servers: the same code as over one
// client.Conn.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := cluster.Dial(ctx,
		cluster.Static("127.0.0.1:9090", "127.0.0.1:9091", "127.0.0.1:9092"),
		cluster.WithBalancer(cluster.PowerOfTwoChoices()),
		cluster.WithConnOptions(client.WithRDMA("off")))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	c := echo.NewEchoClient(cl)
	s, err := c.Echo(ctx, "hello")
	switch {
	case errors.Is(err, cluster.ErrNotRetried):
		// echo is not hinted idempotent: its server failed under it, and
		// only the caller knows whether running it twice is safe.
	case err != nil:
		fmt.Println(err)
	default:
		fmt.Println(s)
	}
	for _, s := range cl.Servers() {
		fmt.Println(s.Addr, s.Up, s.Breaker)
	}
}
