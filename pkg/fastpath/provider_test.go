package fastpath

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProvider(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""}, {"off", ""}, {"auto", "auto"}, {"shm", "shm"}, {"ibv", "ibv"},
	} {
		got, err := ParseProvider(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	for _, in := range []string{"OFF", "rdma", "tcp", " shm"} {
		_, err := ParseProvider(in)
		require.ErrorIs(t, err, ErrBadProvider, in)
	}
}
