package interop_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testutil"
)

// TestHintedIDLMatchesPlain guards the premise of the interop tests: the
// IDL hatgen reads and the one Apache's compiler reads describe the same
// types and functions, and differ only in hints.
func TestHintedIDLMatchesPlain(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(testutil.TestdataDir(), name))
		require.NoError(t, err)
		return string(b)
	}
	hinted := read("interop_hinted.thrift")
	plain := read("interop.thrift")
	assert.Contains(t, hinted, "s_hint:", "the hinted copy must carry hints")
	assert.NotContains(t, plain, "hint:", "Apache's compiler rejects hints")
	assert.Equal(t, testutil.StripHints(plain), testutil.StripHints(hinted))
}

func TestStripHints(t *testing.T) {
	tests := []struct{ in, want string }{
		{"service S {\n hint: a = 1, b = x;\n void f() }", "service S { void f() }"},
		{"void f() [ c_hint: x = 1; s_hint: y = 2; ],", "void f(),"},
		{"i32 g(1: i32 a) // c\n", "i32 g(1: i32 a)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, testutil.StripHints(tt.in), tt.in)
	}
}
