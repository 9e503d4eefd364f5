package server

import (
	"bufio"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// startZlib looks at the first bytes of a new connection for Apache's
// TZlibTransport (wire.DetectZlib): if they start a zlib stream, on the
// socket or in frames, the connection reads through an inflater and
// answers compressed the same way; the plain Thrift inside is detected
// as on any connection. Such a connection stays plain Thrift (a HatRPC
// hello on it is not granted the upgrade). The reader calls it before
// anything else reads or writes the connection.
func (c *conn) startZlib() error {
	z, framed, err := wire.DetectZlib(c.br)
	if err != nil || !z {
		return err
	}
	c.zlib = true
	c.br = bufio.NewReaderSize(wire.NewZlibReader(c.br, framed, c.s.opts.limits.MaxMessageSize), readBufSize)
	w := wire.NewWriter(wire.NewZlibWriter(c.nc, framed), nil)
	w.SetTimeout(c.s.opts.writeTimeout)
	c.w = w
	return nil
}
