package flock

import (
	"context"
	"sync"
)

// AppendHandler is a Handler that appends its response to dst: storage the
// server keeps with the response and reuses for a later one once this one
// is posted, so a handler that encodes its response into dst costs no
// allocation. The response's storage becomes the server's: return dst or
// what appending to it gave, or memory the handler gives up. req is only
// valid until it returns, as for a Handler.
type AppendHandler func(ctx context.Context, req, dst []byte) ([]byte, error)

// HandleAppend registers h for handler id.
func (s *Server) HandleAppend(id uint16, h AppendHandler) { s.setHandler(id, handlerEntry{app: h}) }

// handlerEntry is a registered handler: one of the two kinds.
type handlerEntry struct {
	plain Handler
	app   AppendHandler
}

func (s *Server) setHandler(id uint16, h handlerEntry) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	next := make(map[uint16]handlerEntry, len(*s.handlers.Load())+1)
	for k, v := range *s.handlers.Load() {
		next[k] = v
	}
	next[id] = h
	s.handlers.Store(&next)
}

// A server's buffers (bufPool): workers' request copies, which outlive
// the ring slot, and AppendHandlers' response storage. A buffer stays
// with its node until nothing references it: a worker's node until the
// pool hands the node out again (so at most one of each a node, and
// nodes are as many as responses in flight), a dispatcher's (inline)
// nodes until their message is posted (so none idles on a sender's QP).
// What idles in the pool is bounded in size and number: a burst of large
// messages, or thousands of senders' QPs, leave at most keepMax ×
// maxFreeBufs (4 MiB) behind.
const (
	keepMax     = 16 << 10
	maxFreeBufs = 256
)

// bufPool is not a sync.Pool: that one drops what is put back at random
// under the race detector, and the tests hold these paths to no
// allocation under it too.
type bufPool struct {
	mu   sync.Mutex
	free []*[]byte
}

func (p *bufPool) get() *[]byte {
	p.mu.Lock()
	var bp *[]byte
	if k := len(p.free); k > 0 {
		bp, p.free = p.free[k-1], p.free[:k-1]
	}
	p.mu.Unlock()
	if bp == nil {
		bp = new([]byte)
	}
	return bp
}

func (p *bufPool) put(bp *[]byte) {
	if cap(*bp) > keepMax {
		return
	}
	p.mu.Lock()
	if len(p.free) < maxFreeBufs {
		p.free = append(p.free, bp)
	}
	p.mu.Unlock()
}

// recycle gives back the buffers n holds (nothing references them any
// more: n is being reused, or its message was posted).
func (n *node) recycle(to *bufPool) {
	if n.req != nil {
		to.put(n.req)
		n.req = nil
	}
	if n.out != nil {
		to.put(n.out)
		n.out = nil
	}
}

// call runs handler on req and makes n the response. An AppendHandler
// appends to a pooled buffer, which n keeps with the response unless it
// grew past keepMax or the response will be split into parts (which alias
// it, and are freed on their own): then it is left to the collector.
func (s *Server) call(n *node, l *serverQP, caller, seq uint32, handler uint16, req []byte) {
	var out []byte
	size := 0
	status := statusOK
	h, ok := (*s.handlers.Load())[handler]
	var err error
	switch {
	case !ok:
		status = statusNoHandler
	case h.app != nil:
		bp := s.nodes.bufs.get()
		out, err = h.app(s.ctx, req, (*bp)[:0])
		size = len(out)
		switch {
		case err != nil:
			s.nodes.bufs.put(bp) // the response is the error's text
		case len(out) <= s.partSize() && len(out) <= s.cfg.maxReply && cap(out) <= keepMax:
			*bp = out[:0] // out's storage, grown or not, is the server's now
			n.out = bp
		}
	default:
		out, err = h.plain(s.ctx, req)
	}
	if err != nil {
		status, out = statusHandlerErr, []byte(err.Error())
	}
	if len(out) > s.cfg.maxReply {
		status, out = statusHandlerErr, []byte(ErrTooLarge.Error())
	}
	n.reset()
	n.ctx, n.kind, n.caller, n.seq, n.handler, n.status, n.data = s.ctx, opResp, caller, seq, handler, status, out
	n.size = size
}
