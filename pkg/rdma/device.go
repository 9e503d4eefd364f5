package rdma

/*
#include <stdlib.h>
#include "hr.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/hatrpc/hatrpc/pkg/internal/transport"
)

// Provider names, from the transport registry (pkg/internal/transport),
// which also orders the providers auto tries.
const (
	ProviderIBV  = transport.ProviderIBV
	ProviderSHM  = transport.ProviderSHM
	ProviderAuto = transport.ProviderAuto
)

// EnvProvider selects the provider when no option does.
const EnvProvider = "HATRPC_PROVIDER"

type config struct {
	provider  string
	name      string
	gidIndex  int
	port      int
	shmSize   uint64
	rnrTimer  time.Duration
	peerCheck time.Duration
	noFork    bool
}

// Option configures Open.
type Option func(*config)

// WithProvider picks "ibv", "shm" or "auto"; it overrides HATRPC_PROVIDER.
func WithProvider(p string) Option { return func(c *config) { c.provider = p } }

// WithDeviceName selects an ibv device by name (default: first active port).
func WithDeviceName(n string) Option { return func(c *config) { c.name = n } }

// WithGIDIndex overrides the automatic RoCE GID choice.
func WithGIDIndex(i int) Option { return func(c *config) { c.gidIndex = i } }

// WithPort selects the ibv port (default: first active).
func WithPort(p int) Option { return func(c *config) { c.port = p } }

// WithShmSize sets the shm segment size (virtual; pages are used on demand).
func WithShmSize(n uint64) Option { return func(c *config) { c.shmSize = n } }

// WithRNRTimer sets the shm receiver-not-ready retry interval.
func WithRNRTimer(d time.Duration) Option { return func(c *config) { c.rnrTimer = d } }

// WithPeerCheck sets how often shm looks for dead peer processes.
func WithPeerCheck(d time.Duration) Option { return func(c *config) { c.peerCheck = d } }

// WithoutForkInit stops ibv from calling ibv_fork_init.
func WithoutForkInit() Option { return func(c *config) { c.noFork = true } }

// Device is an opened provider device.
type Device struct {
	p        *C.hr_dev
	provider string
	mu       sync.Mutex
	closed   bool
}

// DeviceInfo describes a device.
type DeviceInfo struct {
	Name      string
	Port      int
	MTU       int
	GIDIndex  int
	MaxQPWR   int
	MaxSGE    int
	MaxInline int
	MaxCQE    int
	MaxMR     int    // 0: no limit (shm)
	MaxQP     int    // 0: no limit (shm)
	MaxMRSize uint64 // bytes one MR may cover; 0: no limit (shm)
}

// Open opens a device of the selected provider. "auto" (the default) uses
// ibv when a device is present and falls back to shm, which only reaches
// peers on the same host.
func Open(opts ...Option) (*Device, error) {
	c := config{gidIndex: -1}
	for _, o := range opts {
		o(&c)
	}
	if c.provider == "" {
		c.provider = os.Getenv(EnvProvider)
	}
	if c.provider == "" {
		c.provider = ProviderAuto
	}
	if c.provider != ProviderAuto {
		if transport.ProviderByName(c.provider) == nil {
			return nil, &Error{Op: fmt.Sprintf("open provider %q (want %s)", c.provider, providerChoices()), Status: StatusInvalid}
		}
		return open(c.provider, &c)
	}
	// auto: the first provider, in registry order, with a device here.
	var err error
	for _, p := range transport.Providers {
		var d *Device
		if d, err = open(p.Name, &c); err == nil {
			return d, nil
		}
		if !errors.Is(err, ErrNoDevice) {
			return nil, err
		}
	}
	return nil, err
}

// providerChoices lists the names Open accepts.
func providerChoices() string {
	names := make([]string, 0, len(transport.Providers)+1)
	for _, p := range transport.Providers {
		names = append(names, p.Name)
	}
	return strings.Join(append(names, ProviderAuto), ", ")
}

func open(name string, c *config) (*Device, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	prov := C.hr_provider_by_name(cname)
	if prov == nil {
		return nil, &Error{Op: "open " + name, Status: StatusInvalid}
	}
	var o C.hr_dev_opts
	if c.name != "" {
		o.name = C.CString(c.name)
		defer C.free(unsafe.Pointer(o.name))
	}
	o.gid_index = C.int32_t(c.gidIndex)
	o.port = C.uint32_t(c.port)
	o.shm_size = C.uint64_t(c.shmSize)
	o.rnr_timer_us = C.uint32_t(c.rnrTimer / time.Microsecond)
	o.peer_check_ms = C.uint32_t(c.peerCheck / time.Millisecond)
	if c.noFork {
		o.no_fork_init = 1
	}
	var d *C.hr_dev
	if err := statusErr("open "+name, C.hr_open(prov, &o, &d)); err != nil {
		return nil, err
	}
	return &Device{p: d, provider: name}, nil
}

// Provider reports "ibv" or "shm".
func (d *Device) Provider() string { return d.provider }

// ForkStatus says how registered verbs memory survives a fork() without
// exec, as rdma-core's ibv_is_fork_initialized reports it: the kernel
// copies pinned pages into the child (5.13+), ibv_fork_init marks every
// MR MADV_DONTFORK (Open calls it when the kernel does not copy, unless
// WithoutForkInit), or neither. os/exec needs none of it: Go starts a
// child with clone(CLONE_VM|CLONE_VFORK) and execs, and every fd the
// engine and rdma-core open is close-on-exec. The shm provider marks its
// segments and rings MADV_DONTFORK itself.
func ForkStatus() string { return C.GoString(C.hr_fork_status_str(C.hr_fork_status())) }

// Info queries the device.
func (d *Device) Info() (DeviceInfo, error) {
	var i C.hr_dev_info
	if err := statusErr("query", C.hr_query(d.p, &i)); err != nil {
		return DeviceInfo{}, err
	}
	return DeviceInfo{
		Name: C.GoString(&i.name[0]), Port: int(i.port), MTU: int(i.mtu), GIDIndex: int(i.gid_index),
		MaxQPWR: int(i.max_qp_wr), MaxSGE: int(i.max_sge), MaxInline: int(i.max_inline), MaxCQE: int(i.max_cqe),
		MaxMR: int(i.max_mr), MaxQP: int(i.max_qp), MaxMRSize: uint64(i.max_mr_size),
	}, nil
}

// Counters sums the counters of every QP the device has had.
func (d *Device) Counters() (Counters, error) {
	var c C.hr_counters
	if err := statusErr("device counters", C.hr_dev_counters(d.p, &c)); err != nil {
		return Counters{}, err
	}
	return countersFromC(&c), nil
}

// Close releases the device; every object made from it must be closed first.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return &Error{Op: "close device", Status: StatusClosed}
	}
	d.closed = true
	C.hr_close(d.p)
	return nil
}

func countersFromC(c *C.hr_counters) Counters {
	var g Counters
	for i := 0; i < NumOpcodes; i++ {
		g.Posted[i] = uint64(c.posted[i])
		g.Inbound[i] = uint64(c.inbound[i])
	}
	g.RecvPosted = uint64(c.recv_posted)
	g.BytesOut = uint64(c.bytes_out)
	g.BytesIn = uint64(c.bytes_in)
	g.Completions = uint64(c.completions)
	g.Errors = uint64(c.errors)
	return g
}
