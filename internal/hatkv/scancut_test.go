package hatkv

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/metadata"
)

func TestMergeScans(t *testing.T) {
	recs := func(keys ...string) []*hatkv.KeyRecord {
		var out []*hatkv.KeyRecord
		for _, k := range keys {
			out = append(out, &hatkv.KeyRecord{Key: k})
		}
		return out
	}
	cut := metadata.MD{ScanCutHeader: "1"}
	cases := []struct {
		name  string
		all   [][]*hatkv.KeyRecord
		mds   []metadata.MD
		count int32
		want  []string
	}{
		{"none cut", [][]*hatkv.KeyRecord{recs("a", "d"), recs("b", "c")}, []metadata.MD{nil, nil}, 3, []string{"a", "b", "c"}},
		{"one cut", [][]*hatkv.KeyRecord{recs("a", "b"), recs("c", "d", "e")}, []metadata.MD{cut, nil}, 5, []string{"a", "b"}},
		{"smallest cut", [][]*hatkv.KeyRecord{recs("a", "e"), recs("b", "c"), recs("d")}, []metadata.MD{cut, cut, nil}, 9, []string{"a", "b", "c"}},
		{"count first", [][]*hatkv.KeyRecord{recs("a", "b", "c"), recs("d")}, []metadata.MD{nil, cut}, 2, []string{"a", "b"}},
		{"cut but empty", [][]*hatkv.KeyRecord{recs("a"), nil}, []metadata.MD{nil, cut}, 2, []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range mergeScans(tc.all, tc.mds, tc.count) {
				got = append(got, r.Key)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestClusterScanCutBySize: servers whose Scans are cut by
// MaxScanBytes say so in a reply header, and the cluster's merged Scan
// never skips a key: scanning on from each answer's last key visits every
// key in order.
func TestClusterScanCutBySize(t *testing.T) {
	_, cl := startCluster(t, 3, WithLimits(kvstore.Limits{MaxScanBytes: 4000}))
	ctx := testCtx(t, 60*time.Second)
	var keys []string
	for i := range 300 {
		k := fmt.Sprintf("k%03d", i)
		keys = append(keys, k)
		require.NoError(t, cl.Put(ctx, k, rec("f", strings.Repeat("v", 100))))
	}
	// One server alone: its answer is cut and the header says so.
	var md metadata.MD
	ask := metadata.AppendToOutgoingContext(ctx, ScanCutHeader, "ask")
	one, err := cl.kvAt(ctx, 0).Scan(metadata.CaptureReply(ask, &md), "", 200, nil)
	require.NoError(t, err)
	assert.Less(t, len(one), 100)
	assert.Equal(t, "1", md[ScanCutHeader])

	var seen []string
	start, scans := "", 0
	for len(seen) < len(keys) && scans < 300 {
		scans++
		got, err := cl.Scan(ctx, start, 200, []string{"f"})
		require.NoError(t, err)
		require.NotEmpty(t, got)
		for _, kr := range got {
			seen = append(seen, kr.Key)
		}
		start = got[len(got)-1].Key + "\x00"
	}
	assert.Equal(t, keys, seen, "every key once, in order")
	assert.Greater(t, scans, 1, "answers were cut")
	assert.True(t, slices.IsSorted(seen))
}
