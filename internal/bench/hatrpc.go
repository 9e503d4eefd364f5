package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/hatrpc/hatrpc/internal/bench/gen/atb"
	"github.com/hatrpc/hatrpc/internal/bench/gen/atb/atbserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// Hat is the HatRPC runtime serving and calling the hatgen-generated echo
// service. Callers share Conns pipelined connections (HatRPC connections
// are safe for concurrent use), caller i using connection i % Conns.
type Hat struct {
	Conns int
	// Lanes serves with engine lanes (server.WithRDMA, provider from
	// HATRPC_PROVIDER or auto): calls then run over shm or RDMA with the
	// protocol atb.thrift's hints plan, through the whole runtime.
	Lanes bool
	// TCP is the client.WithConns of each Conn (0: the default). Conns > 1
	// keeps one TCP connection per Conn, so hatrpc-4conn stays four.
	TCP int
	// Owned serves with server.WithOwnedArgs and calls Echo, not
	// EchoBorrowed: argument and result are fresh copies per call, as
	// before HatRPC could borrow them.
	Owned bool
}

// Name is "hatrpc" for one shared connection, "hatrpc-<n>conn" otherwise,
// "hatrpc-lanes" over engine lanes and "hatrpc-owned" with owned arguments.
func (h Hat) Name() string {
	if h.Lanes {
		return lanesName
	}
	if h.Owned {
		return "hatrpc-owned"
	}
	if h.conns() == 1 {
		if h.TCP > 0 {
			return fmt.Sprintf("hatrpc-%dtcp", h.TCP)
		}
		return "hatrpc"
	}
	return fmt.Sprintf("hatrpc-%dconn", h.conns())
}

func (h Hat) tcp() int {
	if h.TCP == 0 && h.conns() > 1 {
		return 1
	}
	return h.TCP
}

func (h Hat) conns() int { return max(h.Conns, 1) }

// lanesName is the runtime-on-lanes system's name.
const lanesName = "hatrpc-lanes"

type hatEcho struct{}

func (hatEcho) Echo(_ context.Context, payload []byte) ([]byte, error) { return payload, nil }

type hatServer struct {
	srv    *server.Server
	addr   string
	served chan error
}

func (s *hatServer) Addr() string { return s.addr }

func (s *hatServer) Stop(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if serr := <-s.served; !errors.Is(serr, server.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// Serve starts a HatRPC server with the generated echo service on addr.
func (h Hat) Serve(_ context.Context, addr string) (Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// The same message cap as the Apache systems; logs would only disturb
	// the timings.
	lim := proto.DefaultLimits
	lim.MaxMessageSize, lim.MaxStringLength = maxMessage, maxMessage
	opts := []server.Option{server.WithLimits(lim), server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	if h.Lanes {
		opts = append(opts, server.WithRDMA(rdma.ProviderAuto))
	}
	if h.Owned {
		opts = append(opts, server.WithOwnedArgs())
	}
	srv := server.New(opts...)
	atbserver.RegisterEcho(srv, hatEcho{})
	s := &hatServer{srv: srv, addr: ln.Addr().String(), served: make(chan error, 1)}
	go func() { s.served <- srv.Serve(ln) }()
	return s, nil
}

type hatCaller struct {
	c     *atb.EchoClient
	conn  *client.Conn
	owner bool // the caller that closes the shared connection
}

func (c *hatCaller) Echo(ctx context.Context, payload []byte) ([]byte, error) {
	return c.c.Echo(ctx, payload)
}

// hatBorrowCaller checks each reply in place (EchoBorrowed); hatrpc-owned
// keeps the plain hatCaller, whose results are its own, as before.
type hatBorrowCaller struct{ *hatCaller }

func (c hatBorrowCaller) EchoCheck(ctx context.Context, payload []byte, check func(rep []byte) error) error {
	return c.c.EchoBorrowed(ctx, payload, check)
}

func (c *hatCaller) Close() error {
	if c.owner {
		return c.conn.Close()
	}
	return nil
}

// Callers dials min(Conns, n) connections and spreads the n callers over
// them.
func (h Hat) Callers(ctx context.Context, addr string, n int) ([]Caller, error) {
	conns := make([]*client.Conn, 0, min(h.conns(), n))
	for len(conns) < cap(conns) {
		lanes := "off" // a server without lanes grants none anyway; be explicit
		if h.Lanes {
			lanes = rdma.ProviderAuto
		}
		opts := []client.Option{client.WithHints(&atb.EchoHints), client.WithRDMA(lanes)}
		if n := h.tcp(); n > 0 {
			opts = append(opts, client.WithConns(n))
		}
		c, err := client.Dial(ctx, addr, opts...)
		if err != nil {
			for _, c := range conns {
				_ = c.Close()
			}
			return nil, fmt.Errorf("hatrpc dial %s: %w", addr, err)
		}
		conns = append(conns, c)
	}
	out := make([]Caller, n)
	for i := range out {
		c := conns[i%len(conns)]
		hc := &hatCaller{c: atb.NewEchoClient(c), conn: c, owner: i < len(conns)}
		if h.Owned {
			out[i] = hc
		} else {
			out[i] = hatBorrowCaller{hc}
		}
	}
	return out, nil
}

func init() {
	Register(Hat{})
	Register(Hat{Conns: 4})
	// One Conn over exactly n TCP connections: hatrpc-1tcp is the runtime
	// before it spread calls (one connection per Conn).
	Register(Hat{TCP: 1})
	Register(Hat{TCP: 2})
	Register(Hat{TCP: 4})
	Register(Hat{TCP: 8})
	Register(Hat{TCP: 16})
	Register(Hat{Lanes: true})
	Register(Hat{Owned: true})
}
