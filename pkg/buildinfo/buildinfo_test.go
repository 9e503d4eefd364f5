package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFromModule(t *testing.T) {
	tests := []struct {
		name string
		m    debug.Module
		want string
	}{
		{"no version", debug.Module{Path: "github.com/hatrpc/hatrpc"}, "devel"},
		{"devel", debug.Module{Version: "(devel)"}, "devel"},
		{"tag", debug.Module{Version: "v0.3.0"}, "v0.3.0"},
		{"vcs stamp", debug.Module{Version: "v0.0.0-20261124221500-0123456789ab+dirty"}, "v0.0.0-20261124221500-0123456789ab+dirty"},
		{"replaced by a checkout", debug.Module{Version: "v0.0.0-00010101000000-000000000000",
			Replace: &debug.Module{Path: "../hatrpc"}}, "devel (../hatrpc)"},
		{"replaced, as go tool records it", debug.Module{Version: "v0.0.0-00010101000000-000000000000",
			Replace: &debug.Module{Path: "/src/hatrpc", Version: "(devel)"}}, "devel (/src/hatrpc)"},
		{"replaced by a version", debug.Module{Version: "v0.1.0",
			Replace: &debug.Module{Path: "example.com/fork", Version: "v0.1.1"}}, "v0.1.1"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, fromModule(tc.m), tc.name)
	}
}

func TestVersionInTest(t *testing.T) {
	// A test binary's main module carries no stamped version.
	assert.Equal(t, "devel", Version())
}
