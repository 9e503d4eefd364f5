package testutil

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scalarEchoer is the part of the interop service whose Go signatures are the
// same in Apache's generated client and hatgen's, so one set of assertions
// covers both implementations.
type scalarEchoer interface {
	Add(ctx context.Context, a int32, b int64) (int64, error)
	EchoString(ctx context.Context, s string) (string, error)
	EchoBinary(ctx context.Context, data []byte) ([]byte, error)
}

func runScalarSuite(t *testing.T, ctx context.Context, c scalarEchoer) {
	t.Run("scalars", func(t *testing.T) {
		tests := []struct {
			name string
			a    int32
			b    int64
			want int64
		}{
			{"small", 2, 40, 42},
			{"extremes", -2147483648, -(1 << 62), -2147483648 - (1 << 62)},
		}
		for _, tt := range tests {
			got, err := c.Add(ctx, tt.a, tt.b)
			require.NoError(t, err, tt.name)
			assert.Equal(t, tt.want, got, tt.name)
		}
		for _, s := range []string{"", "ünïcode", string(make([]byte, 1000))} {
			got, err := c.EchoString(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, s, got)
		}
	})

	t.Run("binary16MiB", func(t *testing.T) {
		big := BigPayload()
		got, err := c.EchoBinary(ctx, big)
		require.NoError(t, err)
		require.Equal(t, len(big), len(got))
		assert.True(t, string(big) == string(got), "16 MiB payload corrupted")
		got, err = c.EchoBinary(ctx, []byte{})
		require.NoError(t, err)
		assert.Empty(t, got)
	})
}
