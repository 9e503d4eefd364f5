package rdma

/*
#include "hr.h"

// A provider with nothing but a name, and one handle of it: every op is a
// default (hr_default_ops.c).
static hr_provider probe_prov;
static struct hr_obj probe_handle;

static hr_dev *hr_probe_dev(void)
{
	const hr_provider bare = {.name = "bare"};
	hr_set_ops(&probe_prov, &bare);
	probe_handle.prov = &probe_prov;
	return (hr_dev *)&probe_handle;
}
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

// cProviderNames lists the C core's provider registry in its order.
func cProviderNames() []string {
	var names []string
	for i := 0; ; i++ {
		p := C.hr_provider_name(C.int(i))
		if p == nil {
			return names
		}
		names = append(names, C.GoString(p))
	}
}

// bareDevice is a Device of a provider that sets no op, for the test that
// what a provider leaves unset reaches Go as ErrNotSupported.
func bareDevice() *Device { return &Device{p: C.hr_probe_dev(), provider: "bare"} }
