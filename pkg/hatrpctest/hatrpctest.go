// Package hatrpctest is an in-memory transport for tests, like gRPC's
// bufconn: a Listener that a server serves on and a client dials without a
// network, a port or a file descriptor.
//
//	l := hatrpctest.Listen()
//	srv := server.New()
//	go srv.Serve(l)
//	conn, err := client.Dial(ctx, l.Addr().String(), client.WithDialer(l.DialContext))
//
// Each connection is a synchronous in-memory pipe (net.Pipe), with
// deadlines. What runs over it is what runs over TCP: HatRPC framing,
// THeader, plain Thrift, TLS when server and client add it. A server made
// WithRDMA("auto") or ("shm") moves a client's calls onto shm lanes as it
// does over TCP (the shared memory is the host's; the lanes' bootstrap
// and liveness connections are further dials of the same Listener); the
// rdma provider needs a NIC and real addresses. Without WithRDMA on the
// server, the default, every call stays on the in-memory connection.
package hatrpctest

import (
	"context"
	"net"
	"sync"
)

// Listener is an in-memory net.Listener. Dial and DialContext connect to
// it; Accept returns the server's end. It is safe for concurrent use.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Listen returns a new Listener.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// addr is the Listener's address; both ends of a connection report it.
type addr struct{}

func (addr) Network() string { return "hatrpctest" }
func (addr) String() string  { return "hatrpctest" }

// Accept waits for the next Dial and returns the server's end of its
// connection; after Close it returns net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops the Listener: a blocked Accept and pending dials return
// net.ErrClosed, and so do later ones. Connections already made stay
// open. Calling it again is harmless.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr returns the Listener's address, "hatrpctest".
func (l *Listener) Addr() net.Addr { return addr{} }

// Dial connects to the Listener, waiting until Accept takes the
// connection or the Listener is closed.
func (l *Listener) Dial() (net.Conn, error) { return l.DialContext(context.Background(), "") }

// DialContext is Dial bounded by ctx, with the signature
// client.WithDialer takes (the address is not used).
func (l *Listener) DialContext(ctx context.Context, _ string) (net.Conn, error) {
	select {
	case <-l.done:
		return nil, &net.OpError{Op: "dial", Net: "hatrpctest", Addr: addr{}, Err: net.ErrClosed}
	default:
	}
	cli, srv := net.Pipe()
	var err error
	select {
	case l.conns <- srv:
		return cli, nil
	case <-l.done:
		err = net.ErrClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	cli.Close()
	srv.Close()
	return nil, &net.OpError{Op: "dial", Net: "hatrpctest", Addr: addr{}, Err: err}
}
