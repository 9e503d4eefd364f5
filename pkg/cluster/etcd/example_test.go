package etcd_test

import (
	"context"
	"fmt"
	"net"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hatrpc/hatrpc/examples/echo/gen/echo"
	"github.com/hatrpc/hatrpc/pkg/cluster"
	"github.com/hatrpc/hatrpc/pkg/cluster/etcd"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// A server announces itself in etcd while it serves; a client finds every
// server of the service there and follows them as they come and go.
func Example() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()

	// Server side: registered under "services/echo/<addr>" with a 10 s
	// lease kept alive; Shutdown deletes the key before draining.
	reg, err := etcd.NewRegistrar(cli, "services/echo",
		etcd.WithAdvertise("10.0.0.7:9090"), // the address clients dial; the listener is on all interfaces
		etcd.WithMetadata(map[string]any{"zone": "a"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := server.New(server.WithRegistrar(reg))
	// ... register the service's handler on srv ...
	ln, err := net.Listen("tcp", ":9090")
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	// Client side: a cluster.Client over whatever etcd lists, updated as
	// etcd reports changes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := etcd.NewResolver(cli, "services/echo")
	if err != nil {
		fmt.Println(err)
		return
	}
	cl, err := cluster.Dial(ctx, res)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	s, err := echo.NewEchoClient(cl).Echo(ctx, "hello")
	fmt.Println(s, err)
}
