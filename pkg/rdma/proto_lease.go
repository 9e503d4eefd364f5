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
