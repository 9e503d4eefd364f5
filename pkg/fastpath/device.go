//go:build cgo && linux

package fastpath

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Device is a reference to the process's shared device of one provider:
// every lane of every client and server in the process shares it, so a
// process maps one shm segment (or opens one NIC context) however many
// connections it has.
type Device struct {
	*rdma.Device
	// Choice is the device/port/GID chosen for the target and why; nil
	// for shm and for the provider's default (Acquire).
	Choice *RDMAChoice
	key    string
	once   sync.Once
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

// Target is what a lane's RDMA device is chosen for: the local address a
// server listens on or accepted the connection on (Local), or the address
// a client dials (Remote), and the explicit override (Spec).
type Target struct {
	Spec   RDMASpec
	Local  net.IP
	Remote string
	// NUMA is the handler's numa hint: among devices that carry the
	// address equally, the one on its node (Selector.NUMA).
	NUMA hints.NUMA
	// Sel reads sysfs and routes; the zero value reads the host's.
	Sel Selector
}

// AcquireFor returns the shared device for provider chosen for t: on ibv
// (and auto with an RDMA device present) the device, port and GID that
// carry the target's address (Selector), opened once per choice. With no
// override, an address no RDMA port carries (loopback, say) falls back to
// the provider's default (the first active port), as Acquire; with one, a
// choice that does not exist is an error listing what does.
func AcquireFor(ctx context.Context, provider string, t Target) (*Device, error) {
	if provider == "" {
		provider = rdma.ProviderAuto
	}
	if provider == rdma.ProviderSHM || (provider == rdma.ProviderAuto && os.Getenv(rdma.EnvProvider) == rdma.ProviderSHM) {
		return Acquire(provider)
	}
	sel := t.Sel
	sel.Spec = t.Spec
	sel.NUMA = t.NUMA
	ports, err := sel.Ports()
	if err != nil || len(ports) == 0 {
		if t.Spec != (RDMASpec{}) && provider == rdma.ProviderIBV {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, errOr(err, fmt.Errorf("%w: %s", ErrNoRDMAChoice, Describe(nil))))
		}
		return Acquire(provider) // auto: shm; ibv: the provider's own error
	}
	ch, err := sel.Choose(ctx, t.Local, t.Remote)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// The chosen port is a NIC's: auto opens it with the RDMA transport's
	// provider, a named provider with itself.
	nic := provider
	if nic == rdma.ProviderAuto {
		nic = transport.ProviderFor(hints.TransportRDMA)
	}
	key := nic + "|" + ch.Key()
	devMu.Lock()
	defer devMu.Unlock()
	e := devices[key]
	if e == nil {
		opts := []rdma.Option{rdma.WithProvider(nic), rdma.WithDeviceName(ch.Device), rdma.WithPort(ch.Port)}
		if ch.GIDIndex >= 0 {
			opts = append(opts, rdma.WithGIDIndex(ch.GIDIndex))
		}
		d, err := rdma.Open(opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: %s port %d gid %d: %w", ErrUnavailable, ch.Device, ch.Port, ch.GIDIndex, err)
		}
		e = &devEntry{dev: d}
		devices[key] = e
	}
	e.refs++
	return &Device{Device: e.dev, Choice: &ch, key: key}, nil
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

// Transport is the hint transport a device provides: the transport its
// provider's lanes carry (pkg/internal/transport).
func (d *Device) Transport() hints.Transport { return transport.OfProvider(d.Provider()) }

// built: this file is compiled, so the fast path is.
const built = true
