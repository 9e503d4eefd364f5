package fastpath

import (
	"errors"
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/hints"
)

// The declarations of this file build everywhere: the runtime's TCP side
// (handshake, plan checks) uses them also where the fast path is not built
// (without cgo, or not on Linux; see doc.go).

// ErrNotBuilt matches asking for rdma or shm from a binary built without
// the fast path (CGO_ENABLED=0, or an OS other than Linux): such a binary
// speaks TCP only.
var ErrNotBuilt = errors.New("fastpath: rdma/shm transports are not in this build (it needs cgo on linux); use tcp")

// NumProtocols is how many engine protocols there are: one per concrete
// value of the protocol hint (every hints.Protocol but auto), in the same
// order; plan.go checks at compile time that the engine agrees.
const NumProtocols = int(hints.ProtoHybrid)

// Built reports whether this binary has the rdma/shm fast path.
func Built() bool { return built }

// OnTransport is set planned for lanes of transport tr: a set that leaves
// the transport to the runtime (auto) takes the lane's, so the planner can
// use its shared-memory design space on shm.
func OnTransport(set hints.Set, tr hints.Transport) hints.Set {
	if set.Transport == hints.TransportAuto {
		set.Transport = tr
	}
	return set
}

// PlanError is a client plan the server cannot serve; it names the
// function, and matches ErrPlanConflict.
type PlanError struct {
	Function string
	Reason   string
}

// ErrPlanConflict matches every PlanError.
var ErrPlanConflict = fmt.Errorf("fastpath: client and server plans conflict")

func (e *PlanError) Error() string {
	return fmt.Sprintf("function %s: %s", e.Function, e.Reason)
}

// Is makes errors.Is(err, ErrPlanConflict) true.
func (e *PlanError) Is(target error) bool { return target == ErrPlanConflict }

// CheckPair reports whether a client that asks for a lane of transport
// lane, with its own transport and protocol hints for fn, can work with the
// server's hints for fn. The engine accepts any pair of protocols (each
// side picks its own, and an RFP server answers a client that does not
// fetch by sending), so what can conflict is where the function runs.
func CheckPair(fn string, lane hints.Transport, clientTransport hints.Transport, server hints.Set) error {
	switch {
	case server.Transport == hints.TransportTCP:
		return &PlanError{fn, fmt.Sprintf("the client asks for a %s lane but the server pins the function to transport=tcp", lane)}
	case server.Transport != hints.TransportAuto && server.Transport != lane:
		return &PlanError{fn, fmt.Sprintf("the client asks for a %s lane but the server pins the function to transport=%s", lane, server.Transport)}
	case clientTransport == hints.TransportTCP:
		return &PlanError{fn, "the client pins the function to transport=tcp, yet asked for a lane"}
	case clientTransport != hints.TransportAuto && clientTransport != lane:
		return &PlanError{fn, fmt.Sprintf("the client pins transport=%s but the lane is %s", clientTransport, lane)}
	}
	return nil
}

// FlockFunction is the attach name that asks for the process's shared
// FLOCK handle (qp_sharing) instead of a lane of one function.
const FlockFunction = "__flock"
