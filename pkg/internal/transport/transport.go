// Package transport is the one registry of HatRPC's transports and verbs
// providers (docs/design/transports.md). A transport is one row of
// Transports: its hint value (whose String is its name, metric label and
// CallInfo.Transport), the handshake capability bit that grants it, the
// verbs provider carrying its lanes and what it demands of the peer. A
// provider is one row of Providers plus one line in the C core's table
// (pkg/rdma/hr_core.c). Every other spelling — PickTransport, the
// client's offer, the server's grant, provider parsing, the bootstrap's
// provider byte, the metric label index — is derived from these rows.
//
// The package is pure Go so that builds without cgo (and pkg/rdma itself)
// can read it.
package transport

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Provider names: the WithRDMA / HATRPC_PROVIDER spellings and the names
// of the C core's provider tables.
const (
	ProviderIBV  = "ibv"  // rdma-core's libibverbs: RDMA NICs (and rxe)
	ProviderSHM  = "shm"  // RC verbs semantics over shared memory, same host only
	ProviderAuto = "auto" // whichever the host has, in Providers order
	ProviderOff  = "off"  // no fast path: every call over TCP
)

// A Provider is a verbs provider of the C core.
type Provider struct {
	Name string // its C table's name
	// ID is its byte in the lane bootstrap message (pkg/rdma): part of
	// the wire contract, never reused.
	ID byte
	// Transport is the transport whose lanes it carries.
	Transport hints.Transport
}

// Providers is every verbs provider, in the order "auto" tries them.
var Providers = [...]Provider{
	{Name: ProviderIBV, ID: 1, Transport: hints.TransportRDMA},
	{Name: ProviderSHM, ID: 2, Transport: hints.TransportSHM},
}

// A Transport is one row of the registry.
type Transport struct {
	Hint hints.Transport // the transport hint; Hint.String() is its name
	// Cap is the handshake capability bit (wire.Cap*) that grants its
	// lanes; 0 for TCP, which every HatRPC connection has.
	Cap uint64
	// Provider is the verbs provider carrying its lanes; "" when its
	// calls run on the TCP connection itself.
	Provider string
	// SameHost: granted only to a client on the server's host (its Hello
	// names the same kernel).
	SameHost bool
}

// Name is the transport's name: its hint spelling, metric label and
// CallInfo.Transport.
func (t *Transport) Name() string { return t.Hint.String() }

// Lanes reports whether the transport's calls run on engine lanes.
func (t *Transport) Lanes() bool { return t.Provider != "" }

// Transports is the registry. Row 0 is TCP, the transport every
// connection has and every other one falls back to; the lane transports
// follow in the order auto prefers them.
var Transports = [...]Transport{
	{Hint: hints.TransportTCP},
	{Hint: hints.TransportRDMA, Cap: wire.CapRDMA, Provider: ProviderIBV},
	{Hint: hints.TransportSHM, Cap: wire.CapSHM, Provider: ProviderSHM, SameHost: true},
}

// Count is the number of transports: per-transport state is an array of
// Count, indexed by Index.
const Count = len(Transports)

// TCP is Transports[0]'s index.
const TCP = 0

// maxHint bounds the hint values the lookup arrays cover.
const maxHint = 8

var (
	byHint   [maxHint]int8 // hint value -> row + 1; 0: not a transport (auto)
	laneCaps uint64
	hostCaps uint64 // the SameHost rows' bits
	choices  string // the WithRDMA spellings, for errors
)

func init() {
	for i := range Transports {
		t := &Transports[i]
		// A row whose hint is out of range or taken stays unindexed, and
		// TestRowsRoundTrip fails on it.
		if t.Hint >= 0 && int(t.Hint) < maxHint && byHint[t.Hint] == 0 {
			byHint[t.Hint] = int8(i + 1)
		}
		laneCaps |= t.Cap
		if t.SameHost {
			hostCaps |= t.Cap
		}
	}
	names := []string{ProviderOff, ProviderAuto}
	for _, p := range Providers {
		names = append(names, p.Name)
	}
	choices = strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Index is the row of hint h, and false for auto (or a value no row has).
func Index(h hints.Transport) (int, bool) {
	if h < 0 || int(h) >= maxHint || byHint[h] == 0 {
		return 0, false
	}
	return int(byHint[h]) - 1, true
}

// Of is the row of hint h; nil for auto.
func Of(h hints.Transport) *Transport {
	i, ok := Index(h)
	if !ok {
		return nil
	}
	return &Transports[i]
}

// Lanes reports whether calls on hint h's transport run on engine lanes.
func Lanes(h hints.Transport) bool {
	t := Of(h)
	return t != nil && t.Lanes()
}

// LaneCaps is every lane transport's capability bit: a session granted
// none of them has no fast path.
func LaneCaps() uint64 { return laneCaps }

// SameHostCaps is the capability bits of the transports granted only on
// one host: a Hello offering one of them names its host.
func SameHostCaps() uint64 { return hostCaps }

// Pick is the hybrid-transport rule, the same on both sides (the client
// picks, the server checks plans by it): a function pinned to TCP stays on
// TCP even on an upgraded connection; otherwise the first lane transport
// (in registry order) that the server granted in caps and the function
// allows wins, and a function pinned to a transport that was not granted
// runs over TCP.
func Pick(want hints.Transport, caps uint64) hints.Transport {
	for i := range Transports {
		t := &Transports[i]
		if t.Cap == 0 || caps&t.Cap == 0 {
			continue
		}
		if g := hints.Granted(want, t.Hint); g != hints.TransportTCP {
			return g // hints.Granted: the one rule, which explain applies too
		}
	}
	return hints.TransportTCP
}

// Granted reports whether caps grant hint h's lanes.
func Granted(h hints.Transport, caps uint64) bool {
	t := Of(h)
	return t != nil && t.Lanes() && caps&t.Cap != 0
}

// ErrBadProvider matches (errors.Is) the error for a provider name that is
// not registered (nor auto or off).
var ErrBadProvider = errors.New("unknown rdma provider")

// ParseProvider reads a WithRDMA provider name, the one parse the client
// and the server share: "off" (or "") turns the fast path off and returns
// ""; "auto" and every registered provider are returned as they are.
func ParseProvider(name string) (string, error) {
	switch name {
	case ProviderOff, "":
		return "", nil
	case ProviderAuto:
		return name, nil
	}
	if ProviderByName(name) != nil {
		return name, nil
	}
	return "", fmt.Errorf("%w %q (want %s)", ErrBadProvider, name, choices)
}

// ProviderByName is the registered provider called name; nil when none is.
func ProviderByName(name string) *Provider {
	for i := range Providers {
		if Providers[i].Name == name {
			return &Providers[i]
		}
	}
	return nil
}

// ProviderByID is the provider whose bootstrap byte is id; nil when none is.
func ProviderByID(id byte) *Provider {
	for i := range Providers {
		if Providers[i].ID == id {
			return &Providers[i]
		}
	}
	return nil
}

// ProviderFor is the provider name a transport hint needs: its row's
// provider, auto for auto, "" for a transport without lanes.
func ProviderFor(h hints.Transport) string {
	if h == hints.TransportAuto {
		return ProviderAuto
	}
	if t := Of(h); t != nil {
		return t.Provider
	}
	return ""
}

// OfProvider is the transport whose lanes provider name carries; auto
// (and any unregistered name) gives TransportAuto.
func OfProvider(name string) hints.Transport {
	if p := ProviderByName(name); p != nil {
		return p.Transport
	}
	return hints.TransportAuto
}

// Offer is the capability bits a client offers for a WithRDMA provider
// choice (already parsed): none for off, the provider's transport for a
// named one, every lane transport for auto.
func Offer(provider string) uint64 {
	switch provider {
	case ProviderOff, "":
		return 0
	case ProviderAuto:
		return laneCaps
	}
	if t := Of(OfProvider(provider)); t != nil {
		return t.Cap
	}
	return 0
}
