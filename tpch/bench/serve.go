package bench

import (
	"context"
	"database/sql"
	"net"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// Server is a HiveServer2 of one configuration serving db.
type Server struct {
	Addr string
	srv  *server.Server
	h    *hs2.Handler
	done chan error
}

// Serve starts a HiveServer2 of configuration cfg on addr (port 0: any
// free one) over db; rdma is server.WithRDMA's provider ("off" for TCP
// only).
func Serve(db *sql.DB, addr string, cfg hs2.Config, rdma string, opts ...server.Option) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	opts = append(append([]server.Option{server.WithRDMA(rdma)}, cfg.ServerOptions()...), opts...)
	s := &Server{Addr: ln.Addr().String(), srv: server.New(opts...), h: hs2.New(db), done: make(chan error, 1)}
	hs2.Register(s.srv, s.h, cfg)
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Shutdown stops the server, its sessions and their cursors.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	<-s.done
	s.h.Close()
	return err
}
