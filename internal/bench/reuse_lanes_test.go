//go:build cgo && linux

package bench

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/bench/gen/atb"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// TestBorrowedReuseOverLanes: EchoBorrowed through a Conn without
// interceptors reuses its pooled values; over engine lanes (shm, or RDMA
// with HATRPC_PROVIDER=ibv), concurrently, every caller's use sees its
// own payload, and a call that fails leaves nothing behind for the next.
func TestBorrowedReuseOverLanes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := serveEchoConn(ctx, t, &aliasEcho{borrowed: map[bool]int{}}, []server.Option{server.WithRDMA("auto")}, client.WithRDMA("auto"))
	require.True(t, conn.ReusesValues())
	c := atb.NewEchoClient(conn)
	sizes := []int{0, 1, 64, 4096, 40 << 10}
	const callers, calls = 8, 50
	eachCall(callers, calls, func(g, i int) bool {
		p := bytes.Repeat([]byte{byte(g*calls + i + 1)}, sizes[(g+i)%len(sizes)])
		ran := false
		err := c.EchoBorrowed(ctx, p, func(r []byte) error {
			ran = true
			assert.True(t, bytes.Equal(p, r), "caller %d call %d (%d bytes): wrong result", g, i, len(p))
			return nil
		})
		return assert.NoError(t, err) && assert.True(t, ran)
	})

	var sent uint64
	for _, s := range conn.LaneStats() {
		for _, n := range s.Requests {
			sent += n
		}
	}
	require.Equal(t, uint64(callers*calls), sent, "every call went over lanes")

	// A call whose context is already over fails before it is sent; the
	// next call, with the same pooled value, gets its own result.
	done, stop := context.WithCancel(ctx)
	stop()
	require.ErrorIs(t, c.EchoBorrowed(done, []byte("never"), func([]byte) error { return nil }), context.Canceled)
	require.NoError(t, c.EchoBorrowed(ctx, []byte("next"), func(r []byte) error {
		assert.Equal(t, "next", string(r))
		return nil
	}))
}
