package fastpath

import "github.com/hatrpc/hatrpc/pkg/internal/transport"

// ErrBadProvider matches (errors.Is) the error for a provider name that is
// none of off, auto and the registered providers (shm, ibv).
var ErrBadProvider = transport.ErrBadProvider

// ParseProvider reads a WithRDMA provider name, the one parse the client
// and the server share: "off" (or "") turns the fast path off and returns
// ""; "auto" and the registered providers ("shm", "ibv") are returned as
// they are.
func ParseProvider(name string) (string, error) { return transport.ParseProvider(name) }
