//go:build cgo && linux

package fastpath

import (
	"fmt"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

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

// Provider is the verbs provider a transport needs: shm for shm, ibv for
// rdma, auto (whichever the host has) for auto, "" for tcp.
func Provider(t hints.Transport) string {
	switch t {
	case hints.TransportSHM:
		return rdma.ProviderSHM
	case hints.TransportRDMA:
		return rdma.ProviderIBV
	case hints.TransportAuto:
		return rdma.ProviderAuto
	}
	return ""
}

// built: this file is compiled, so the fast path is.
const built = true
