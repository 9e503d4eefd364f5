package server

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// hello answers the capability handshake and switches the connection to
// HatRPC framing when both sides can, granting lanes when the server has
// them and the client can reach them. It reports true when the connection
// itself became a lane (an attach hello): the reader then stops.
func (c *conn) hello(p proto.Protocol, name string, seqid int32, body []byte) bool {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	to := replyTo{proto: p, name: name, seqid: seqid, hello: true}
	c.takeOrder(&to)
	var h wire.Hello
	hl := wire.HelloLimits(&c.s.opts.limits)
	if err := codec.Decode(p, body, &hl, &h); err != nil {
		c.reply(&to, proto.Exception,
			proto.NewApplicationException(proto.ExcProtocolError, "hello: "+err.Error()), codec)
		return false
	}
	rep := wire.HelloReply{Version: wire.Version, Transport: "tcp", MaxFrame: int32(min(c.s.opts.limits.MaxMessageSize, 1<<31-1))}
	upgrade := !c.s.opts.noUpgrade && !c.overHTTP() && !c.zlib && h.Version >= 1 && h.Caps&wire.CapFraming != 0
	var caps uint64
	if upgrade {
		caps = c.s.laneCaps(&h, c.localAddr())
	}
	if upgrade && h.Caps&wire.CapAttach != 0 && h.Attach != nil {
		l, exc := c.grantLane(&h, caps)
		if exc != nil {
			c.reply(&to, proto.Exception, exc, codec)
			return false
		}
		rep.Caps = wire.CapFraming | wire.CapAttach | caps | l.grantCancel(&h)
		rep.Transport = transportNames[l.tr]
		c.mu.Lock()
		c.fp = &laneSession{c: c, l: l}
		c.mu.Unlock()
		c.reply(&to, proto.Reply, &rep, codec)
		return true
	}
	if upgrade {
		rep.Caps = wire.CapFraming | caps | h.Caps&wire.CapHeaders
		c.grantStreams(&h, &rep) // stream.go
		rep.ConflictFunction, rep.Conflict = c.s.checkPlans(&h, rep.Caps)
		if rep.Conflict != "" {
			c.s.log.Warn("hatrpc: client plan refused", "remote", c.remote, "function", rep.ConflictFunction, "reason", rep.Conflict)
		}
	}
	c.reply(&to, proto.Reply, &rep, codec)
	if upgrade {
		c.hat, c.headers = true, rep.Caps&wire.CapHeaders != 0
		c.upgraded.Store(true)
	}
	return false
}

// firstLimits are the limits a connection's first message is read with:
// where it may be a hello, which has a bound of its own
// (wire.MaxHelloSize), those of a hello.
func (c *conn) firstLimits(lim *proto.Limits, first bool) *proto.Limits {
	if !first || !c.mayHello() {
		return lim
	}
	hl := wire.HelloLimits(lim)
	return &hl
}

// mayHello tells whether this connection's first message may be a hello
// that upgrades it: binary or compact, framed or not; not THeader (whose
// frame the limit bounds before its message is seen), zlib, HTTP or JSON,
// which stay plain Thrift.
func (c *conn) mayHello() bool {
	return !c.format.Header && !c.zlib && !c.overHTTP() && c.format.Proto != proto.JSON
}

// checkFirst refuses a first message that was read past the message limit
// (firstLimits) and is not a hello, as the limit refuses any other.
func (c *conn) checkFirst(p proto.Protocol, mh *wire.MsgHeader, size int) error {
	if size <= c.s.opts.limits.MaxMessageSize || splitName(string(mh.Name)) == wire.HelloMethod {
		return nil
	}
	// The error the read would have given at the limit.
	err := fmt.Errorf("%w: message over %d bytes", wire.ErrFrameTooLarge, c.s.opts.limits.MaxMessageSize)
	if c.format.Framed {
		err = fmt.Errorf("%w: frame of %d bytes", wire.ErrFrameTooLarge, size)
	}
	c.fatalReply(&replyTo{proto: p, name: string(mh.Name), seqid: mh.Seqid}, err)
	return err
}
