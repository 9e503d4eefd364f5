package tracing_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientDeps: a client that traces (pkg/tracing) links no server code
// and no Prometheus; the server interceptor (tracingserver) does.
func TestClientDeps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
	defer cancel()
	const mod = "github.com/hatrpc/hatrpc/"
	deps := func(pkg string) []string {
		out, err := exec.CommandContext(ctx, "go", "list", "-deps", pkg).Output()
		require.NoError(t, err)
		return strings.Fields(string(out))
	}
	for _, p := range deps(mod + "pkg/tracing") {
		assert.False(t, strings.HasPrefix(p, mod+"pkg/server"), "pkg/tracing links %s", p)
		assert.False(t, strings.HasPrefix(p, "github.com/prometheus/"), "pkg/tracing links %s", p)
	}
	assert.Contains(t, deps(mod+"pkg/tracing/tracingserver"), mod+"pkg/server")
}
