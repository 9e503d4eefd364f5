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

// keepMax bounds the storage a node keeps between responses, and a
// pooled request copy: a rare large message does not pin its size.
const keepMax = 64 << 10

// bufPool holds the workers' request copies. Not a sync.Pool: that one
// drops what is put back at random under the race detector, and the
// tests hold the worker path to no allocation under it too.
type bufPool struct {
	mu   sync.Mutex
	free []*[]byte
}

// maxFreeBufs bounds the copies kept idle: more than the requests a
// server has in flight at once.
const maxFreeBufs = 1024

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

// recycleReq gives the node's request copy back (the node is free:
// nothing references it any more).
func (n *node) recycleReq(to *bufPool) {
	if bp := n.req; bp != nil {
		n.req = nil
		to.put(bp)
	}
}

// call runs handler on req and makes n the response. An AppendHandler
// appends to n's kept storage; what it returns is kept for n's next
// response unless it will be split into parts (which alias it, and are
// freed on their own) or is too large to keep.
func (s *Server) call(n *node, l *slane, caller, seq uint32, handler uint16, req []byte) {
	var out []byte
	status := statusOK
	h, ok := (*s.handlers.Load())[handler]
	var err error
	switch {
	case !ok:
		status = statusNoHandler
	case h.app != nil:
		if out, err = h.app(s.ctx, req, n.out[:0]); err == nil {
			if len(out) <= s.partSize() && len(out) <= s.cfg.maxReply && cap(out) <= keepMax {
				n.out = out[:0]
			} else {
				n.out = nil
			}
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
}
