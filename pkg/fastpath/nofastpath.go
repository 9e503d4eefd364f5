//go:build !cgo || !linux

package fastpath

// Device stands for the shared verbs device where the fast path is not
// built: there is none, so a *Device is always nil.
type Device struct{}

// Release is a no-op: no Device exists in this build.
func (*Device) Release() {}

// built: the fast path is not compiled into this binary.
const built = false

// ForkStatus has no verbs to ask in this build.
func ForkStatus() string { return "not built (no cgo): no registered memory" }

// PortLimitsOf has no verbs to ask in this build.
func PortLimitsOf(string, int) (PortLimits, error) { return PortLimits{}, ErrNotBuilt }
