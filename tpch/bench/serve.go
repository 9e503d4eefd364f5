package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"

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

	http     *http.Server  // Thrift over HTTP behind BasicAuth (ServeAuth with PLAIN)
	httpDone chan struct{} // its Serve returned
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

// Auth says which clients a server takes on its one port.
type Auth struct {
	// NOSASL: clients without authentication (NOSASL binary sockets,
	// Thrift over HTTP without credentials, HatRPC's own clients).
	NOSASL bool
	// PLAIN checks SASL PLAIN clients' and HTTP Basic credentials (nil:
	// none are taken; the port is NOSASL's alone).
	PLAIN sasl.Authenticator
}

// Check says whether a server can take the clients a allows with lanes of
// rdma.
func (a Auth) Check(rdma string) error {
	if a.PLAIN == nil && !a.NOSASL {
		return errors.New("auth: no client is taken (want NOSASL, PLAIN or both)")
	}
	if !a.NOSASL && rdma != "off" {
		return fmt.Errorf("auth: PLAIN only with lanes (rdma %s): HatRPC's clients, the only ones using lanes, are NOSASL ones (take both, or rdma off)", rdma)
	}
	return nil
}

// ServeAuth is ServeWith on addr for the clients auth allows, each
// connection's kind told from its first bytes (package sasl): SASL PLAIN
// negotiations, NOSASL connections (refused with a Thrift exception if
// !auth.NOSASL) and Thrift over HTTP (Basic credentials checked by
// auth.PLAIN, required if !auth.NOSASL: 401 otherwise). rdma must be
// "off" if NOSASL clients are refused: HatRPC's clients, the only ones
// that use lanes, do not authenticate.
func ServeAuth(db *sql.DB, addr string, cfg hs2.Config, rdma string, hopts []hs2.Option, auth Auth, opts ...server.Option) (*Server, error) {
	if err := auth.Check(rdma); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if auth.PLAIN == nil {
		return ServeWith(db, ln, cfg, rdma, hopts, opts...), nil
	}
	var lopts []sasl.Option
	if auth.NOSASL {
		lopts = append(lopts, sasl.WithNOSASL())
	}
	sl := sasl.Listen(ln, auth.PLAIN, lopts...)
	s := ServeWith(db, sl, cfg, rdma, hopts, opts...)
	// HTTP connections come to this server, not the HatRPC server's own
	// detection, so that Basic credentials are checked before its
	// handler; the limits are those the HatRPC server sets on its own
	// port's HTTP connections (its defaults).
	s.http = &http.Server{
		Handler:           sasl.BasicAuth(s.srv.HTTPHandler(), auth.PLAIN, auth.NOSASL),
		ReadHeaderTimeout: server.DefaultHandshakeTimeout,
		IdleTimeout:       server.DefaultIdleTimeout,
	}
	s.httpDone = make(chan struct{})
	go func() {
		defer close(s.httpDone)
		_ = s.http.Serve(sl.HTTP())
	}()
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
	var herr error
	if s.http != nil {
		// First: its requests finish on the HatRPC server still serving.
		herr = s.http.Shutdown(ctx)
	}
	err := s.srv.Shutdown(ctx)
	<-s.done
	if s.http != nil {
		<-s.httpDone
		err = errors.Join(herr, err)
	}
	if s.wait != nil {
		s.wait()
	}
	s.h.Close()
	return err
}
