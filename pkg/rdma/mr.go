package rdma

/*
#include "hr.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// PD is a protection domain.
type PD struct {
	dev    *Device
	p      *C.hr_pd
	closed atomic.Bool
}

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (*PD, error) {
	var p *C.hr_pd
	if err := statusErr("alloc pd", C.hr_alloc_pd(d.p, &p)); err != nil {
		return nil, err
	}
	return &PD{dev: d, p: p}, nil
}

// Close frees the protection domain.
func (pd *PD) Close() error {
	if pd.closed.Swap(true) {
		return &Error{Op: "free pd", Status: StatusClosed}
	}
	return statusErr("free pd", C.hr_free_pd(pd.p))
}

// MR is registered memory owned by C; Bytes is a lease over it valid until
// Close.
type MR struct {
	pd     *PD
	mr     *C.hr_mr
	buf    unsafe.Pointer
	size   int
	closed atomic.Bool
}

// AllocMR allocates size bytes of memory the provider can register (shm: in
// the shareable segment) and registers it with access.
func (pd *PD) AllocMR(size int, access Access) (*MR, error) {
	if size <= 0 {
		return nil, &Error{Op: "alloc mr", Status: StatusInvalid}
	}
	var buf unsafe.Pointer
	if err := statusErr("alloc mr", C.hr_alloc_buf(pd.p, C.size_t(size), &buf)); err != nil {
		return nil, err
	}
	var mr *C.hr_mr
	if err := statusErr("reg mr", C.hr_reg_mr(pd.p, buf, C.size_t(size), C.uint32_t(access), &mr)); err != nil {
		C.hr_free_buf(pd.p, buf, C.size_t(size))
		return nil, err
	}
	return &MR{pd: pd, mr: mr, buf: buf, size: size}, nil
}

// Bytes is the region's memory. The slice must not be used after Close.
func (m *MR) Bytes() []byte {
	if m.closed.Load() {
		return nil
	}
	return unsafe.Slice((*byte)(m.buf), m.size)
}

// Addr is the region's start address, as peers address it.
func (m *MR) Addr() uint64 { return uint64(uintptr(m.buf)) }

// Len is the region's size.
func (m *MR) Len() int { return m.size }

// LKey is the local key.
func (m *MR) LKey() uint32 { return uint32(m.mr.lkey) }

// RKey is the remote key.
func (m *MR) RKey() uint32 { return uint32(m.mr.rkey) }

// SGE describes [off, off+n) of the region.
func (m *MR) SGE(off, n int) SGE {
	return SGE{Addr: m.Addr() + uint64(off), Length: uint32(n), LKey: m.LKey()}
}

// Remote describes the whole region for a peer.
func (m *MR) Remote() RemoteBuffer {
	return RemoteBuffer{Addr: m.Addr(), RKey: m.RKey(), Len: uint64(m.size)}
}

// Deregister revokes the keys but keeps the memory; Close does both.
func (m *MR) Deregister() error {
	if m.mr == nil {
		return nil
	}
	err := statusErr("dereg mr", C.hr_dereg_mr(m.mr))
	m.mr = nil
	return err
}

// Close deregisters the region and frees its memory.
func (m *MR) Close() error {
	if m.closed.Swap(true) {
		return &Error{Op: "close mr", Status: StatusClosed}
	}
	var err error
	if m.mr != nil {
		err = m.Deregister()
	}
	C.hr_free_buf(m.pd.p, m.buf, C.size_t(m.size))
	return err
}
