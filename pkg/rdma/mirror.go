package rdma

/*
#include "hr.h"
*/
import "C"

import "unsafe"

// The C side of the mirror checks in status_test.go (cgo is not allowed in
// test files).

// cStatuses lists the C enum in Go's constant order.
func cStatuses() []int {
	return []int{C.HR_OK, C.HR_ENODEV, C.HR_ENOMEM, C.HR_EINVAL, C.HR_ENORES, C.HR_EREMOTE_ACCESS,
		C.HR_ERNR_RETRY, C.HR_ERETRY_EXC, C.HR_EFLUSH, C.HR_ECLOSED, C.HR_ELOCAL_PROT, C.HR_ELOCAL_LEN,
		C.HR_EREMOTE_INVAL, C.HR_EREMOTE_OP, C.HR_ECQ_OVERFLOW, C.HR_ETIMEDOUT, C.HR_ESTATE,
		C.HR_ENOTSUP, C.HR_EIO, C.HR_EPEER, C.HR_ELOCAL_OP, C.HR_STATUS_MAX}
}

// cOffsets returns the C field offsets that must match the Go structs.
func cOffsets() map[string]uintptr {
	var w C.hr_send_wr
	var r C.hr_recv_wr
	var c C.hr_wc
	return map[string]uintptr{
		"send.sg": unsafe.Offsetof(w.sg), "send.remote_addr": unsafe.Offsetof(w.remote_addr),
		"send.rkey": unsafe.Offsetof(w.rkey), "send.compare_add": unsafe.Offsetof(w.compare_add),
		"send.swap": unsafe.Offsetof(w.swap), "send.imm": unsafe.Offsetof(w.imm),
		"recv.sg": unsafe.Offsetof(r.sg), "wc.byte_len": unsafe.Offsetof(c.byte_len),
		"wc.qp_num": unsafe.Offsetof(c.qp_num), "wc.vendor_err": unsafe.Offsetof(c.vendor_err),
		"wc.opcode_send":  uintptr(C.HR_OP_ATOMIC_CMP_AND_SWP),
		"wc.opcode_recv":  uintptr(C.HR_WC_RECV),
		"wc.opcode_rwimm": uintptr(C.HR_WC_RECV_RDMA_WITH_IMM),
	}
}

// cNop is one cgo crossing doing nothing, for BenchmarkCgoCrossing.
func cNop(x int) int { return int(C.hr_nop(C.int(x))) }
