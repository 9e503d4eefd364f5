package bench

import (
	"context"
	"net"
	"sync/atomic"
)

// Counter counts the bytes a client's sockets read and write.
type Counter struct{ n atomic.Int64 }

// Bytes is the count so far.
func (c *Counter) Bytes() int64 { return c.n.Load() }

// Dial dials TCP and counts what the connection carries.
func (c *Counter) Dial(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: &c.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}
