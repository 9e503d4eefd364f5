//go:build cgo && linux

package server

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A lane carries one stream at a time (docs/design/streams.md, "Streams
// on lanes"): the client's open turns it into the stream's, and each of
// its requests then holds the client's stream frames (open, data, end,
// credit, reset: the TCP frames, one after another), each reply the
// server's. A request of nothing but credit ending in an empty credit is
// a poll: its reply waits until the server has a frame to send, so a
// stream costs no exchange while its handler has nothing to say. Once the stream's end
// or a reset went either way the lane is free for the next stream.

// laneBatch bounds the frames one reply carries (at least one frame is
// carried, whatever its size).
const laneBatch = 1 << 20

// laneStream is the stream a lane carries.
type laneStream struct {
	out *streamcore.Outbox // the handler's frames, for the replies; nil: no stream
	id  int32
	buf []byte // the reply: valid until the next request
}

// streamCall runs one request of a lane carrying a stream; it returns
// the reply and the protocol to send it by.
func (ls *laneSession) streamCall(req []byte) ([]byte, rdma.Protocol) {
	c, l := ls.c, ls.l
	l.in.Add(float64(len(req)))
	sl := &ls.stream
	if sl.out == nil {
		sl.out = streamcore.NewOutbox()
		st := streamcore.NewConn(sl.out.Write, c.releaseStreamMsg, l.peerWin, streamcore.WithDefaults(c.s.opts.streams.windows))
		c.mu.Lock()
		c.st, c.sw = st, sl.out
		c.mu.Unlock()
	}
	poll, reset, err := ls.fileStreamFrames(req)
	if err != nil {
		// As a malformed frame closes a connection, it ends the lane: its
		// stream is reset, and the lane stops once this reply is out.
		c.s.log.Info("hatrpc: bad stream frame on a lane", "remote", c.remote, "function", l.fn, "err", err)
		c.endStreams(err)
		sl.buf = wire.AppendResetFrame(sl.buf[:0], sl.id, proto.ExcProtocolError, err.Error())
		ls.leaveStream()
		ls.stop()
		return ls.streamReply(sl.buf)
	}
	// A poll waits for a frame to send while the stream is open; the
	// lane's end (the client gone, the server closing) ends the wait.
	for poll && sl.out.Len() == 0 && c.st.Len() > 0 {
		select {
		case <-sl.out.Wake():
		case <-c.ctx.Done():
			poll = false
		}
	}
	// Whether the stream is still open is read before the take: a handler
	// writes its end (or a reset its frame) before the stream is finished,
	// so a stream over by now has every frame queued for this take. Read
	// after, a handler ending in between would be taken for over with its
	// end still queued, and the end dropped with the outbox (a server
	// stream ending at once: the client's next poll was answered as a
	// call, 'lane reply frame kind 3').
	live := c.st.Len() > 0
	b := sl.out.TakeLease(min(laneBatch, fastpath.MaxMessage), ls.replyLease)
	ended := reset || endsStream(b)
	if len(b) == 0 {
		b = wire.AppendWindowFrame(sl.buf[:0], sl.id, 0, 0) // an answer with nothing to say
		sl.buf = b
		ended = ended || !live
	}
	if ended {
		ls.leaveStream()
	}
	return ls.streamReply(b)
}

// replyLease is where a reply of n bytes of frames is taken to: the
// engine's registered buffer from leaseMin (the engine then sends it
// without staging a copy: one copy of each message fewer), else the
// session's own buffer (a lease costs a cgo crossing, more than copying
// a small reply). The lease is never kept past the reply: the engine may
// move its buffer.
func (ls *laneSession) replyLease(n int) []byte {
	if ep := ls.l.ep; n >= leaseMin && ep != nil && !ls.l.viaFLOCK {
		if lease := ep.ReplyBuffer(n); len(lease) >= n {
			return lease[:n]
		}
	}
	sl := &ls.stream
	if cap(sl.buf) < n {
		sl.buf = make([]byte, 0, n)
	}
	if n <= laneBufKeep {
		return sl.buf[:n]
	}
	b := sl.buf[:n]
	sl.buf = nil // not a huge one forever
	return b
}

func (ls *laneSession) streamReply(b []byte) ([]byte, rdma.Protocol) {
	ls.l.out.Add(float64(len(b)))
	return b, ls.l.side.Protocol(len(b))
}

// leaveStream frees the lane of its stream: the client will send no more
// frames for it, and frames its handler still writes (none but after a
// reset, which fails them anyway) have nowhere to go.
func (ls *laneSession) leaveStream() {
	c := ls.c
	ls.stream.out.Close()
	ls.stream.out = nil
	c.mu.Lock()
	c.st, c.sw = nil, nil
	c.mu.Unlock()
}

// fileStreamFrames files the frames of a request with the lane's stream
// as the connection's reader files a TCP connection's: poll reports a
// request of nothing but credit whose last frame is an empty credit,
// reset one that resets the stream.
// An error is a malformed request.
func (ls *laneSession) fileStreamFrames(req []byte) (poll, reset bool, err error) {
	c := ls.c
	poll = true
	for off := 0; off < len(req); {
		h, err := wire.DecodeHeader(req[off:], c.s.opts.limits.MaxMessageSize)
		if err != nil {
			return false, false, err
		}
		end := off + wire.HeaderSize + h.PayloadLen()
		switch {
		case end > len(req):
			return false, false, fmt.Errorf("%w: lane stream frame of %d bytes in %d", wire.ErrBadFrame, end-off, len(req)-off)
		case h.Kind < wire.KindStreamOpen || h.Kind > wire.KindStreamReset:
			return false, false, fmt.Errorf("%w: frame kind %d on a lane carrying a stream", wire.ErrBadFrame, h.Kind)
		case h.Kind == wire.KindStreamOpen:
			ls.stream.id = h.Seqid
		}
		// Credit alone asks for nothing back, but an empty credit last
		// asks to be held till there is (the client's poll, alone or
		// after its credit: one exchange, not one for the credit's empty
		// answer and another to poll).
		if h.Kind != wire.KindStreamWindow {
			poll = false
		} else if end == len(req) && (h.PayloadLen() != 8 || !emptyCredit(req[off+wire.HeaderSize:end])) {
			poll = false
		}
		reset = reset || h.Kind == wire.KindStreamReset
		// The request is the engine's lease: what the stream keeps (its
		// queued messages) is copied out, as a reader's frames are its own.
		// Sized for the frame: a large message is not grown into from a
		// small pooled buffer (fresh memory, faulted in, every message).
		bp := wire.GetBufSize(end - off)
		*bp = append((*bp)[:0], req[off:end]...)
		if err := c.streamFrame(&h, bp); err != nil {
			return false, false, err
		}
		off = end
	}
	return poll, reset, nil
}

func emptyCredit(payload []byte) bool {
	msgs, n, err := wire.ParseWindow(payload)
	return err == nil && msgs == 0 && n == 0
}

// endsStream reports whether the server's frames b hold the stream's end
// or a reset.
func endsStream(b []byte) bool {
	for off := 0; off+wire.HeaderSize <= len(b); {
		h, err := wire.DecodeHeader(b[off:], len(b))
		if err != nil {
			return false
		}
		if h.Kind == wire.KindStreamEnd || h.Kind == wire.KindStreamReset {
			return true
		}
		off += wire.HeaderSize + h.PayloadLen()
	}
	return false
}
