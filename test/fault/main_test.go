// Package fault holds the fault-injection acceptance tests of the HatRPC
// TCP runtime: misbehaving peers, vanished clients, a server that goes away
// and many idle connections. Every test checks the same promises: the
// server stays up, bystander clients are unaffected, memory and goroutines
// stay bounded and callers get errors rather than hangs.
package fault_test

import (
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/test/testutil"
)

func TestMain(m *testing.M) {
	// The re-executed test binary acts as a client process (see child.go).
	testutil.ChildMain(childRoles)
	thrift.ServerStopTimeout = 2 * time.Second
	goleak.VerifyTestMain(m)
}
