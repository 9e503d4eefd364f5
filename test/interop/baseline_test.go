package interop_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hatrpc/hatrpc/test/testutil"
)

// TestBaselineApache checks the harness itself with Apache on both ends:
// the Go client suite and the Python script must pass against Apache's own
// server before their verdicts on HatRPC mean anything.
func TestBaselineApache(t *testing.T) {
	gen := testutil.GenPython(t)
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			addr, _ := testutil.StartApacheServer(t, s)
			t.Run("go", func(t *testing.T) {
				testutil.RunApacheClientSuite(t, testutil.DialApache(t, addr, s))
			})
			t.Run("python", func(t *testing.T) {
				assert.Equal(t, testutil.PyChecks, testutil.RunPython(t, gen, addr, s))
			})
		})
	}
}
