package emul

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkGet is one client's GET round trip per emulation, busy and
// event polling, on a 1 KB record.
func BenchmarkGet(b *testing.B) {
	for _, poll := range pollings {
		for _, kind := range Kinds() {
			b.Run(fmt.Sprintf("%v/%v", kind, poll), func(b *testing.B) {
				e := newEnv(b)
				c := e.dial(b, kind, WithPolling(poll))
				ctx := testCtx(b, testTimeout)
				require.NoError(b, c.Insert(ctx, "user1", record("user1", 0, 10, 100)))
				b.ResetTimer()
				for range b.N {
					if _, err := c.Read(ctx, "user1", nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
