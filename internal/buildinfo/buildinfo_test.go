package buildinfo

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFromMain(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "devel"},
		{"(devel)", "devel"},
		{"v0.3.0", "v0.3.0"},
		{"v0.0.0-20261124221500-0123456789ab+dirty", "v0.0.0-20261124221500-0123456789ab+dirty"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, fromMain(tc.in), tc.in)
	}
}

func TestVersionInTest(t *testing.T) {
	// A test binary's main module is the test's package: no stamped version.
	assert.Equal(t, "devel", Version())
}
