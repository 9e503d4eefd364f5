package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBaselineSystems: a name with BaselineSuffix stands for the baseline
// binary's system of its base name, only once a baseline is set; its
// processes run that binary under the base name, every other system's
// this one.
func TestBaselineSystems(t *testing.T) {
	t.Cleanup(func() { require.NoError(t, SetBaseline("")) })
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("x"), 0o644))

	require.NoError(t, SetBaseline(""))
	_, err = Lookup("hatrpc@base")
	require.ErrorIs(t, err, ErrNoBaseline)
	_, _, err = binaryFor("hatrpc@base")
	require.ErrorIs(t, err, ErrNoBaseline)

	for _, bad := range []struct{ path, msg string }{
		{filepath.Join(dir, "none"), "stat " + filepath.Join(dir, "none") + ": no such file or directory"},
		{plain, plain + ": not an executable file"},
		{dir, dir + ": not an executable file"},
	} {
		require.EqualError(t, SetBaseline(bad.path), bad.msg)
	}

	require.NoError(t, SetBaseline(self))
	for _, tc := range []struct {
		name, bin, child string
	}{
		{"hatrpc-lanes@base", self, "hatrpc-lanes"},
		{"hatrpc-lanes", self, "hatrpc-lanes"},
	} {
		bin, child, err := binaryFor(tc.name)
		require.NoError(t, err)
		assert.Equal(t, tc.bin, bin)
		assert.Equal(t, tc.child, child)
	}
	s, err := Lookup("no-such-system-here@base")
	require.NoError(t, err, "the baseline build may have systems this one has not")
	assert.Equal(t, "no-such-system-here@base", s.Name())
	_, err = s.Serve(t.Context(), "127.0.0.1:0")
	require.ErrorIs(t, err, errBaselineInProcess)
	_, err = s.Callers(t.Context(), "127.0.0.1:0", 1)
	require.ErrorIs(t, err, errBaselineInProcess)
	for _, bad := range []string{"@base", "hatrpc@base@base"} {
		_, err := Lookup(bad)
		require.ErrorIs(t, err, ErrUnknownSystem, bad)
	}
	assert.Equal(t, "shm-rfp", BaseName("shm-rfp@base"))
	assert.Equal(t, "shm-rfp", BaseName("shm-rfp"))
	p, poll := Describe("hatrpc-lanes@base", 64, 1)
	assert.Equal(t, []string{"lanes", "-"}, []string{p, poll})
	assert.Equal(t, systemLabel("hatrpc@base", 64, 1), "hatrpc@base (TCP loopback)")
}
