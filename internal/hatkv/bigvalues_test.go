package hatkv

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
)

// laneRequests sums, per function, the requests this client sent on the
// fast path (lanes and FLOCK).
func laneRequests(c *Client) map[string]uint64 {
	out := map[string]uint64{}
	for _, st := range c.conns[0].LaneStats() {
		for _, n := range st.Requests {
			out[st.Function] += n
		}
	}
	return out
}

// TestLargeValuesOverFastPath: no size cliff on the fast path. A 1 MB
// record is put (its request too large for a FLOCK message: a lane) and
// read back (its reply too large for one: in parts), and a MultiGet of
// 1,000 × 1 KB answers whole; every call takes the fast path.
func TestLargeValuesOverFastPath(t *testing.T) {
	ts := startServer(t, "")
	ctx := testCtx(t, 60*time.Second)
	blob := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	require.NoError(t, ts.kv.Put(ctx, "big", hatkv.Record{"blob": blob}))
	got, err := ts.kv.Get(ctx, "big", nil)
	require.NoError(t, err)
	require.Equal(t, blob, got["blob"])

	const n = 1000
	recs := make([]*hatkv.KeyRecord, n)
	keys := make([]string, n)
	for i := range recs {
		keys[i] = fmt.Sprintf("k%04d", i)
		recs[i] = &hatkv.KeyRecord{Key: keys[i], Record: hatkv.Record{"v": bytes.Repeat([]byte{byte(i)}, 1024)}}
	}
	require.NoError(t, ts.kv.MultiPut(ctx, recs))
	res, err := ts.kv.MultiGet(ctx, keys, nil)
	require.NoError(t, err)
	require.Len(t, res, n)
	for i, r := range res {
		require.True(t, r.Found, keys[i])
		require.Equal(t, recs[i].Record["v"], r.Record["v"], keys[i])
	}
	lanes := laneRequests(ts.client)
	for _, fn := range []string{"HatKV:Put", "HatKV:Get", "HatKV:MultiPut", "HatKV:MultiGet"} {
		assert.Positive(t, lanes[fn], "%s did not take the fast path (%v)", fn, lanes)
	}
}
