package dist

import (
	"context"
	"net"
	"time"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/tpch/gen/exchange/exchangeserver"
	eb "github.com/hatrpc/hatrpc/tpch/gen/exchangebase"
)

// Serve serves w as configuration cfg on ln (rdma: HatRPC's lane
// provider, "off" for TCP only; vanilla is Apache Thrift on TCP) until
// the returned stop is called.
func Serve(w *Worker, ln net.Listener, cfg Config, rdma string) (stop func(context.Context) error) {
	return serve(served{w, cfg, rdma}, ln, cfg, rdma)
}

// served is a worker as one configuration serves it: a shuffle's inputs
// travel between the workers in that configuration too.
type served struct {
	*Worker
	cfg  Config
	rdma string
}

func (s served) OpenFragment(ctx context.Context, req *eb.OpenReq) (*eb.OpenResp, error) {
	return s.open(ctx, req, s.cfg, s.rdma)
}

// serve serves any implementation of the exchange (tests: a worker that
// hangs).
func serve(w exchanger, ln net.Listener, cfg Config, rdma string) (stop func(context.Context) error) {
	if cfg == Vanilla {
		s := serveApache(w, ln)
		return func(context.Context) error { return s() }
	}
	srv := server.New(append([]server.Option{server.WithRDMA(rdma)}, cfg.ServerOptions()...)...)
	exchangeserver.RegisterExchange(srv, w)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		<-done // Serve's error after Shutdown says only that it was shut down
		return err
	}
}

// listen listens on addr, retrying for a few seconds while the port is
// still held (a worker restarted on the address of one just killed).
func listen(addr string) (net.Listener, error) {
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}
