package client

import (
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// The client's plan: the one place its route and protocol are decided
// for calls, streams and Plan alike (docs/design/plan.md).

// Plan returns the plan table the Conn runs method ("name" or
// "Service:name") by: once the method was called or opened, from the
// hints (and stream mode) that call or stream ran by, else from the hint
// tables given with WithHints. Its rows give each message size's route
// (lane, FLOCK or TCP) and engine protocol, a client or bidirectional
// stream's batch rows too, and Transport is what the current session
// granted the method (shm or rdma when the server granted that fast
// path, else TCP). It is the same table hatgen explain prints for that
// transport.
func (c *Conn) Plan(method string) hints.Table {
	v, ok := c.planned.Load(method)
	if !ok {
		v, ok = c.fns.Load(method)
	}
	var fn *hints.Function
	if ok {
		fn = v.(*hints.Function)
	}
	var mode stream.Mode
	if fn != nil {
		mode = fn.Stream
	}
	set, respSize := c.laneSet(fn)
	return c.tableFor(set, respSize, c.transportFor(set.Transport), mode)
}

// laneSet is the client hints a method's lanes plan with (the
// WithLaneProtocol override applied) and the server's declared response
// size.
func (c *Conn) laneSet(fn *hints.Function) (set hints.Set, respSize int) {
	if fn != nil {
		set, respSize = fn.Client, fn.Server.PayloadSize
	}
	if c.o.laneProto != hints.ProtoAuto {
		set.Protocol = c.o.laneProto
	}
	return set, respSize
}

// tableFor builds the client table of a method on transport tr (a
// stream's by its mode: no FLOCK, batch rows for what the client sends):
// the one place the client's route and protocol are decided, for calls,
// streams and Plan alike.
func (c *Conn) tableFor(set hints.Set, respSize int, tr hints.Transport, mode stream.Mode) hints.Table {
	return hints.TableFor(set, hints.Env{Side: hints.SideClient, Transport: tr, Cores: c.cores, PeerPayload: respSize, Stream: mode})
}

// transportFor settles a requested transport against what the current
// connection negotiated.
func (c *Conn) transportFor(want hints.Transport) hints.Transport {
	c.mu.Lock()
	var caps uint64
	if c.sess != nil {
		caps = c.sess.caps
	}
	c.mu.Unlock()
	return fastpath.PickTransport(want, caps)
}

// prepare returns m as its calls are planned (at service level with
// WithServiceLevelHints) and notes its hints for Plan.
func (c *Conn) prepare(m *Method) *Method {
	if c.o.svcLevel && m.Hints != nil {
		m = c.serviceLevel(m)
	}
	c.noteHints(m)
	return m
}

// noteHints notes what m's calls or streams run by, for Plan (the first
// seen for its name wins): its hints as planned (prepare) and its stream
// mode, which the runtime takes from m itself, so Plan shows a stream's
// table, batch rows included, even for a stream without hints.
func (c *Conn) noteHints(m *Method) {
	key := m.Service + ":" + m.Name
	if _, ok := c.planned.Load(key); ok {
		return
	}
	fn := m.Hints
	if fn == nil || fn.Stream != m.Stream {
		cp := hints.Function{Name: m.Name}
		if fn != nil {
			cp = *fn
		}
		cp.Stream = m.Stream
		fn = &cp
	}
	c.planned.LoadOrStore(m.Name, fn)
	c.planned.LoadOrStore(key, fn)
}
