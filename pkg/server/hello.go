package server

import (
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
	to := replyTo{proto: p, name: name, seqid: seqid}
	c.takeOrder(&to)
	var h wire.Hello
	if err := codec.Decode(p, body, &c.s.opts.limits, &h); err != nil {
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
		rep.Caps = wire.CapFraming | wire.CapAttach | caps
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
