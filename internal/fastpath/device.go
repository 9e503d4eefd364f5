package fastpath

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// ErrUnavailable matches failures to open the verbs provider a lane needs.
var ErrUnavailable = errors.New("fastpath: rdma/shm transport unavailable")

// Device is a reference to the process's shared device of one provider:
// every lane of every client and server in the process shares it, so a
// process maps one shm segment (or opens one NIC context) however many
// connections it has.
type Device struct {
	*rdma.Device
	key  string
	once sync.Once
}

type devEntry struct {
	dev  *rdma.Device
	refs int
}

var (
	devMu   sync.Mutex
	devices = map[string]*devEntry{}
)

// Acquire returns the shared device for provider ("auto", "shm", "ibv";
// "" is auto), opening it on first use. Release it when done; the last
// release closes it.
func Acquire(provider string) (*Device, error) {
	if provider == "" {
		provider = "auto"
	}
	devMu.Lock()
	defer devMu.Unlock()
	e := devices[provider]
	if e == nil {
		var opts []rdma.Option
		if provider != rdma.ProviderAuto {
			opts = append(opts, rdma.WithProvider(provider)) // auto leaves HATRPC_PROVIDER in charge
		}
		d, err := rdma.Open(opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		e = &devEntry{dev: d}
		devices[provider] = e
	}
	e.refs++
	return &Device{Device: e.dev, key: provider}, nil
}

// Release drops the reference; calling it twice is harmless.
func (d *Device) Release() {
	d.once.Do(func() {
		devMu.Lock()
		defer devMu.Unlock()
		e := devices[d.key]
		if e == nil {
			return
		}
		if e.refs--; e.refs == 0 {
			delete(devices, d.key)
			_ = e.dev.Close()
		}
	})
}

// Transport is the hint transport a device provides: shm for the shm
// provider, rdma for real NICs.
func (d *Device) Transport() hints.Transport {
	if d.Provider() == rdma.ProviderSHM {
		return hints.TransportSHM
	}
	return hints.TransportRDMA
}

var (
	hostOnce sync.Once
	hostID   string
)

// HostID identifies this kernel (its boot id): two processes may share
// memory only when they run on the same one. Without a readable boot id
// the host name stands in (shm then fails at bootstrap, not silently, if
// two hosts share a name).
func HostID() string {
	hostOnce.Do(func() {
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			hostID = strings.TrimSpace(string(b))
		}
		if hostID == "" {
			if h, err := os.Hostname(); err == nil {
				hostID = "host:" + h
			}
		}
	})
	return hostID
}
