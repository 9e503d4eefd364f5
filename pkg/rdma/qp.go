package rdma

/*
#include "hr.h"

// The post calls return the failing WR's index packed with the status: a
// Go pointer to a local passed to C escapes, so an out-parameter would cost
// an allocation per post.
static inline uint64_t hr_post_send_packed(hr_qp *qp, const hr_send_wr *wr, uint32_t n) {
	uint32_t bad = 0;
	int st = hr_post_send(qp, wr, n, &bad);
	return (uint64_t)bad << 32 | (uint32_t)st;
}
static inline uint64_t hr_post_srq_recv_packed(hr_srq *s, const hr_recv_wr *wr, uint32_t n) {
	uint32_t bad = 0;
	int st = hr_post_srq_recv(s, wr, n, &bad);
	return (uint64_t)bad << 32 | (uint32_t)st;
}
static inline uint64_t hr_post_recv_packed(hr_qp *qp, const hr_recv_wr *wr, uint32_t n) {
	uint32_t bad = 0;
	int st = hr_post_recv(qp, wr, n, &bad);
	return (uint64_t)bad << 32 | (uint32_t)st;
}
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// SRQ is a shared receive queue.
type SRQ struct {
	p      *C.hr_srq
	closed atomic.Bool
}

// CreateSRQ creates a shared receive queue.
func (pd *PD) CreateSRQ(maxWR, maxSGE int) (*SRQ, error) {
	var s *C.hr_srq
	if err := statusErr("create srq", C.hr_create_srq(pd.p, C.uint32_t(maxWR), C.uint32_t(maxSGE), &s)); err != nil {
		return nil, err
	}
	return &SRQ{p: s}, nil
}

// MaxWR is how many receives the SRQ holds, as the device granted it (verbs
// may round the requested depth up).
func (s *SRQ) MaxWR() int { return int(C.hr_srq_max_wr(s.p)) }

// PostRecv posts receives to the SRQ in one crossing.
func (s *SRQ) PostRecv(wrs []RecvWR) error {
	if s.closed.Load() {
		return &Error{Op: "post srq recv", Status: StatusClosed}
	}
	if len(wrs) == 0 {
		return nil
	}
	r := uint64(C.hr_post_srq_recv_packed(s.p, (*C.hr_recv_wr)(unsafe.Pointer(&wrs[0])), C.uint32_t(len(wrs))))
	return postErr("post srq recv", C.int(int32(uint32(r))), C.uint32_t(r>>32))
}

// Close destroys the SRQ (its QPs must be closed first).
func (s *SRQ) Close() error {
	if s.closed.Swap(true) {
		return &Error{Op: "destroy srq", Status: StatusClosed}
	}
	if err := statusErr("destroy srq", C.hr_destroy_srq(s.p)); err != nil {
		s.closed.Store(false)
		return err
	}
	return nil
}

// QPConfig sizes an RC queue pair.
type QPConfig struct {
	SendCQ, RecvCQ *CQ
	SRQ            *SRQ // optional
	MaxSendWR      int
	MaxRecvWR      int // ignored with an SRQ
	MaxSGE         int
	MaxInline      int
	// RNRRetry is 0..7; 7 retries forever.
	RNRRetry int
	// RetryCount is 0..7 (ibv transport retries); 0 means 7.
	RetryCount int
}

// QP is a reliable-connected queue pair.
type QP struct {
	pd       *PD
	p        *C.hr_qp
	provider string
	closed   atomic.Bool
}

// CreateQP creates an RC queue pair in the INIT state.
func (pd *PD) CreateQP(cfg QPConfig) (*QP, error) {
	if cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return nil, &Error{Op: "create qp", Status: StatusInvalid}
	}
	in := C.hr_qp_init{
		send_cq:     unsafe.Pointer(cfg.SendCQ.p),
		recv_cq:     unsafe.Pointer(cfg.RecvCQ.p),
		max_send_wr: C.uint32_t(cfg.MaxSendWR),
		max_recv_wr: C.uint32_t(cfg.MaxRecvWR),
		max_sge:     C.uint32_t(cfg.MaxSGE),
		max_inline:  C.uint32_t(cfg.MaxInline),
		rnr_retry:   C.uint32_t(cfg.RNRRetry),
		retry_cnt:   C.uint32_t(cfg.RetryCount),
	}
	if cfg.SRQ != nil {
		in.srq = unsafe.Pointer(cfg.SRQ.p)
	}
	var q *C.hr_qp
	if err := statusErr("create qp", C.hr_create_qp(pd.p, &in, &q)); err != nil {
		return nil, err
	}
	return &QP{pd: pd, p: q, provider: pd.dev.provider}, nil
}

// Endpoint is what the peer needs to connect to this QP; buffers are the
// regions the protocol exposes.
func (qp *QP) Endpoint(buffers ...RemoteBuffer) (Endpoint, error) {
	var a C.hr_qp_attr
	if err := statusErr("qp attr", C.hr_qp_local_attr(qp.p, &a)); err != nil {
		return Endpoint{}, err
	}
	e := Endpoint{
		Provider: qp.provider,
		QPN:      uint32(a.qpn), PSN: uint32(a.psn), LID: uint32(a.lid),
		GIDIndex: int32(a.gid_index), MTU: uint32(a.mtu),
		Blob:    C.GoBytes(unsafe.Pointer(&a.blob[0]), C.int(a.blob_len)),
		Buffers: append([]RemoteBuffer(nil), buffers...),
	}
	for i := range e.GID {
		e.GID[i] = byte(a.gid[i])
	}
	return e, nil
}

// Connect moves the QP through RTR to RTS against the peer's endpoint.
func (qp *QP) Connect(peer Endpoint) error {
	if peer.Provider != qp.provider || len(peer.Blob) > maxBlob {
		return &Error{Op: "connect", Status: StatusBadPeer}
	}
	var a C.hr_qp_attr
	a.qpn = C.uint32_t(peer.QPN)
	a.psn = C.uint32_t(peer.PSN)
	a.lid = C.uint32_t(peer.LID)
	a.gid_index = C.int32_t(peer.GIDIndex)
	a.mtu = C.uint32_t(peer.MTU)
	for i, b := range peer.GID {
		a.gid[i] = C.uint8_t(b)
	}
	for i, b := range peer.Blob {
		a.blob[i] = C.uint8_t(b)
	}
	a.blob_len = C.uint32_t(len(peer.Blob))
	return statusErr("connect", C.hr_qp_connect(qp.p, &a))
}

func postErr(op string, st C.int, bad C.uint32_t) error {
	if st == C.HR_OK {
		return nil
	}
	return &PostError{Op: op, Index: int(bad), Status: Status(st)}
}

// PostSend posts a chain of work requests: one crossing, one doorbell.
func (qp *QP) PostSend(wrs []SendWR) error {
	if qp.closed.Load() {
		return &Error{Op: "post send", Status: StatusClosed}
	}
	if len(wrs) == 0 {
		return nil
	}
	r := uint64(C.hr_post_send_packed(qp.p, (*C.hr_send_wr)(unsafe.Pointer(&wrs[0])), C.uint32_t(len(wrs))))
	return postErr("post send", C.int(int32(uint32(r))), C.uint32_t(r>>32))
}

// PostRecv posts receives in one crossing.
func (qp *QP) PostRecv(wrs []RecvWR) error {
	if qp.closed.Load() {
		return &Error{Op: "post recv", Status: StatusClosed}
	}
	if len(wrs) == 0 {
		return nil
	}
	r := uint64(C.hr_post_recv_packed(qp.p, (*C.hr_recv_wr)(unsafe.Pointer(&wrs[0])), C.uint32_t(len(wrs))))
	return postErr("post recv", C.int(int32(uint32(r))), C.uint32_t(r>>32))
}

// SetError moves the QP to the error state; outstanding work is flushed.
func (qp *QP) SetError() error { return statusErr("set error", C.hr_qp_set_error(qp.p)) }

// State reports the QP state.
func (qp *QP) State() QPState { return QPState(C.hr_qp_state(qp.p)) }

// QPCaps are the sizes a QP was granted (a provider may round requests up).
type QPCaps struct {
	MaxSendWR, MaxRecvWR, MaxSGE, MaxInline int
}

// Caps reports the granted sizes.
func (qp *QP) Caps() (QPCaps, error) {
	var c C.hr_qp_caps
	if err := statusErr("qp caps", C.hr_query_qp_caps(qp.p, &c)); err != nil {
		return QPCaps{}, err
	}
	return QPCaps{MaxSendWR: int(c.max_send_wr), MaxRecvWR: int(c.max_recv_wr), MaxSGE: int(c.max_sge),
		MaxInline: int(c.max_inline)}, nil
}

// Counters returns the QP's counters.
func (qp *QP) Counters() (Counters, error) {
	var c C.hr_counters
	if err := statusErr("qp counters", C.hr_qp_counters(qp.p, &c)); err != nil {
		return Counters{}, err
	}
	return countersFromC(&c), nil
}

// Close destroys the QP.
func (qp *QP) Close() error {
	if qp.closed.Swap(true) {
		return &Error{Op: "destroy qp", Status: StatusClosed}
	}
	return statusErr("destroy qp", C.hr_destroy_qp(qp.p))
}

// Layout checks: Go work requests and completions are handed to C as is.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(SendWR{})-uintptr(C.sizeof_hr_send_wr)]
	_ = [1]struct{}{}[unsafe.Sizeof(RecvWR{})-uintptr(C.sizeof_hr_recv_wr)]
	_ = [1]struct{}{}[unsafe.Sizeof(Completion{})-uintptr(C.sizeof_hr_wc)]
	_ = [1]struct{}{}[unsafe.Sizeof(SGE{})-uintptr(C.sizeof_hr_sge)]
)
