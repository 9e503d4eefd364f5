package hatkv

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// TestScanCutToReplyRoom: after a Scan of 1 record taught the server a
// small reply, a Scan whose reply would outgrow the connection's memory
// share, or the message limit, is cut where its room ends (at least one
// record) and says which in its reply header, instead of being built
// whole (before: the memory share's case built 5 MB and failed with
// "reply … exceeds the connection's memory share"); scanning on from each
// answer's last key visits every key once, in order.
func TestScanCutToReplyRoom(t *testing.T) {
	msgLimit := proto.DefaultLimits
	msgLimit.MaxMessageSize = 1 << 20
	cases := []struct {
		name   string
		rpc    []server.Option
		maxLen int // bytes of keys and values one answer may hold
		why    string
	}{
		// A reply up to the share may take all of it (the connection
		// holds nothing else).
		{"memory share", []server.Option{server.WithMemoryBudget(8<<20, 2<<20)}, 2 << 20, ScanCutMemory},
		{"message limit", []server.Option{server.WithMemoryBudget(0, 0), server.WithLimits(msgLimit)}, 1 << 20, ScanCutMessageLimit},
	}
	for _, tc := range cases {
		// Over TCP and on a lane ("auto": the test's fast-path
		// provider), whose replies are charged to the same share and
		// bounded by the lane's maximum.
		for _, transport := range []string{"tcp", "auto"} {
			t.Run(tc.name+"/"+transport, func(t *testing.T) {
				scanCutToReplyRoom(t, tc.rpc, transport, tc.maxLen, tc.why)
			})
		}
	}
}

// scanCutToReplyRoom is one case of TestScanCutToReplyRoom.
func scanCutToReplyRoom(t *testing.T, rpc []server.Option, transport string, maxLen int, why string) {
	const records, vsize = 5000, 1000
	ts := startServer(t, "", WithRPCOptions(rpc...))
	ctx := testCtx(t, 60*time.Second)
	c, err := Dial(ctx, ts.addr, WithClientTransport(transport))
	require.NoError(t, err)
	defer closeWithin(t, c, 10*time.Second)
	kv := c.KV()
	val := []byte(strings.Repeat("v", vsize))
	var keys []string
	for i := 0; i < records; i += 100 {
		var b []*hatkv.KeyRecord
		for j := i; j < i+100; j++ {
			k := fmt.Sprintf("k%05d", j)
			keys = append(keys, k)
			b = append(b, &hatkv.KeyRecord{Key: k, Record: hatkv.Record{"f": val}})
		}
		require.NoError(t, kv.MultiPut(ctx, b))
	}
	one, err := kv.Scan(ctx, "", 1, nil)
	require.NoError(t, err)
	require.Len(t, one, 1)

	ask := metadata.AppendToOutgoingContext(ctx, ScanCutHeader, "ask")
	var seen []string
	start, cuts := "", 0
	for len(seen) < records && cuts <= records {
		var md metadata.MD
		got, err := kv.Scan(metadata.CaptureReply(ask, &md), start, records, nil)
		require.NoError(t, err)
		require.NotEmpty(t, got)
		require.LessOrEqual(t, len(got)*(len(keys[0])+vsize), maxLen, "an answer within its room")
		if len(seen)+len(got) < records {
			require.Equal(t, why, md[ScanCutHeader], "a short answer says why")
			cuts++
		}
		for _, kr := range got {
			seen = append(seen, kr.Key)
		}
		start = got[len(got)-1].Key + "\x00"
	}
	assert.Equal(t, keys, seen, "every key once, in order")
	assert.GreaterOrEqual(t, cuts, 2, "answers were cut")
}
