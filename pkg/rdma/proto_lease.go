package rdma

/*
#include "hr_goglue.h"
*/
import "C"

import "unsafe"

// RequestBuffer is a lease on the send staging buffer for n bytes: a
// request written there is sent without a copy. Valid until the next call;
// nil once the endpoint is closed. A lease that fits the buffer as the
// last exchange left it costs no crossing (the view in e.out, see
// hr_ep_out): only a larger one crosses, to grow the buffer.
func (e *RPCEndpoint) RequestBuffer(n int) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() || n <= 0 {
		return nil
	}
	if lv := &e.out.lv; uint64(n) <= uint64(lv.tx_room) {
		return unsafe.Slice((*byte)(lv.tx), n)
	}
	return lease(C.hrgo_tx(e.epAddr(), C.uint64_t(n), e.outAddr()), n)
}

// ReplyBuffer is a lease to build the pending request's response in (n
// bytes) so Reply sends it without a copy; nil if none fits, or there is
// no request to answer. Crosses only when RequestBuffer would.
func (e *RPCEndpoint) ReplyBuffer(n int) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() || n <= 0 {
		return nil
	}
	lv := &e.out.lv
	switch {
	case lv.pending == 0:
		return nil
	case uint64(n) <= uint64(lv.resp_room):
		return unsafe.Slice((*byte)(lv.resp), n)
	case uint64(n) <= uint64(lv.tx_room):
		return unsafe.Slice((*byte)(lv.tx), n)
	}
	return lease(C.hrgo_reply_buf(e.epAddr(), C.uint64_t(n), e.outAddr()), n)
}

// NextReplyBuffer is a lease to build the reply after next in (n bytes, or
// fewer: see below),
// while reply (the pending request's, about to be sent by Reply or
// ServeCalls) goes out: the engine keeps two staging buffers, and this is
// the one reply does not go from, so another goroutine may fill it while
// the exchange runs (C touches it only to send a reply whose payload lies
// in it). A reply sent from it needs no copy, and the buffer the last
// reply went from becomes the next lease in turn: a stream of replies is
// filled and sent at once, neither copied. Valid until the reply whose
// payload lies in it, a Reply of anything else that follows it (it may
// then become the buffer that reply is staged in), or Close; nil when the
// endpoint is closed or no request is pending. The spare is sized by the
// first lease asked of it and never grows (no exchange has to retire a
// buffer another goroutine may be filling), so a lease of it is shorter
// than n when the staging buffer it swapped with was smaller: the
// staging buffer grows when it is leased that way in turn.
func (e *RPCEndpoint) NextReplyBuffer(reply []byte, n int) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() || n <= 0 || e.out.lv.pending == 0 {
		return nil
	}
	return e.nextBufferLocked(reply, n)
}

// NextRequestBuffer is NextReplyBuffer for a client: a lease to build the
// request after next in (n bytes, or fewer) while req (the next Call's)
// goes out, in the staging buffer req does not go from. The engine stages
// requests as it does replies (a payload in the spare swaps it in), and
// the spare's last request has landed once its Call returned (the server
// answered it, a read rendezvous's source released before the answer),
// so another goroutine may fill the lease while the Call runs. Valid
// until the Call whose payload lies in it, a Call of anything else after
// that (it may then be the buffer that request is staged in), or Close;
// nil when the endpoint is closed.
func (e *RPCEndpoint) NextRequestBuffer(req []byte, n int) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() || n <= 0 {
		return nil
	}
	return e.nextBufferLocked(req, n)
}

// nextBufferLocked is the staging buffer msg does not go from, n bytes or
// fewer (the spare never grows).
func (e *RPCEndpoint) nextBufferLocked(msg []byte, n int) []byte {
	lv := &e.out.lv
	if inLease(msg, lv.spare, lv.spare_room) {
		// msg goes from the spare, which the engine swaps in: the
		// staging buffer is the next spare.
		if uint64(n) <= uint64(lv.tx_room) {
			return unsafe.Slice((*byte)(lv.tx), n)
		}
		return lease(C.hrgo_tx(e.epAddr(), C.uint64_t(n), e.outAddr()), n)
	}
	if lv.spare != nil {
		return unsafe.Slice((*byte)(lv.spare), min(uint64(n), uint64(lv.spare_room)))
	}
	return lease(C.hrgo_tx_spare(e.epAddr(), C.uint64_t(n), e.outAddr()), n)
}

// inLease reports whether b starts in the lease of room bytes at p.
func inLease(b []byte, p unsafe.Pointer, room C.uint64_t) bool {
	if len(b) == 0 || p == nil {
		return false
	}
	a, start := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(p)
	return a >= start && a < start+uintptr(room)
}

// replyBufferCrossing is ReplyBuffer always asking C (tests compare).
func (e *RPCEndpoint) replyBufferCrossing(n int) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return lease(C.hrgo_reply_buf(e.epAddr(), C.uint64_t(n), e.outAddr()), n)
}

// requestBufferCrossing is RequestBuffer always asking C (tests compare).
func (e *RPCEndpoint) requestBufferCrossing(n int) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return lease(C.hrgo_tx(e.epAddr(), C.uint64_t(n), e.outAddr()), n)
}

func lease(p unsafe.Pointer, n int) []byte {
	if p == nil || n <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}
