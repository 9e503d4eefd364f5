package fastpath

import (
	"errors"
	"fmt"
)

// ErrBadProvider matches (errors.Is) the error for a provider name that is
// none of off, auto, shm and ibv.
var ErrBadProvider = errors.New("unknown rdma provider")

// ParseProvider reads a WithRDMA provider name, the one parse the client
// and the server share: "off" (or "") turns the fast path off and returns
// ""; "auto", "shm" and "ibv" are returned as they are.
func ParseProvider(name string) (string, error) {
	switch name {
	case "off", "":
		return "", nil
	case "auto", "shm", "ibv":
		return name, nil
	}
	return "", fmt.Errorf("%w %q (want off, auto, shm or ibv)", ErrBadProvider, name)
}
