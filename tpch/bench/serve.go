package bench

import (
	"context"
	"database/sql"
	"net"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/tpch/hs2"
	"github.com/hatrpc/hatrpc/tpch/sasl"
)

// Server is a HiveServer2 of one configuration serving db.
type Server struct {
	Addr string
	srv  *server.Server
	h    *hs2.Handler
	done chan error
	wait func() // the listener's goroutines, after Shutdown closed it
}

// Serve starts a HiveServer2 of configuration cfg on addr (port 0: any
// free one) over db; rdma is server.WithRDMA's provider ("off" for TCP
// only).
func Serve(db *sql.DB, addr string, cfg hs2.Config, rdma string, opts ...server.Option) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return ServeOn(db, ln, cfg, rdma, opts...), nil
}

// ServeEngine is Serve with options of the HiveServer2 handler.
func ServeEngine(db *sql.DB, addr string, cfg hs2.Config, rdma string, hopts []hs2.Option, opts ...server.Option) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return ServeWith(db, ln, cfg, rdma, hopts, opts...), nil
}

// ServePLAIN is Serve for clients that authenticate with SASL PLAIN
// (Thrift's TSaslServerTransport), as auth allows; hopts are the
// HiveServer2 handler's options.
func ServePLAIN(db *sql.DB, addr string, cfg hs2.Config, hopts []hs2.Option, auth sasl.Authenticator, opts ...server.Option) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	sl := sasl.Listen(ln, auth)
	s := ServeWith(db, sl, cfg, "off", hopts, opts...)
	s.wait = sl.Wait
	return s, nil
}

// ServeOn is Serve on a listener of the caller's.
func ServeOn(db *sql.DB, ln net.Listener, cfg hs2.Config, rdma string, opts ...server.Option) *Server {
	return ServeWith(db, ln, cfg, rdma, nil, opts...)
}

// ServeWith is ServeOn with options of the HiveServer2 handler (such as
// hs2.WithEngine: the distributed engine).
func ServeWith(db *sql.DB, ln net.Listener, cfg hs2.Config, rdma string, hopts []hs2.Option, opts ...server.Option) *Server {
	opts = append(append([]server.Option{server.WithRDMA(rdma)}, cfg.ServerOptions()...), opts...)
	s := &Server{Addr: ln.Addr().String(), srv: server.New(opts...), h: hs2.New(db, hopts...), done: make(chan error, 1)}
	hs2.Register(s.srv, s.h, cfg)
	go func() { s.done <- s.srv.Serve(ln) }()
	return s
}

// Shutdown stops the server, its sessions and their cursors.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	<-s.done
	if s.wait != nil {
		s.wait()
	}
	s.h.Close()
	return err
}
