package kvstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Scan stops before the record that would take its keys and records
// past MaxScanBytes, says so, and always returns at least one record.
func TestScanCutBySize(t *testing.T) {
	s := openTest(t, WithLimits(Limits{MaxScanBytes: 1000}))
	ctx := testCtx(t)
	for i := range 20 {
		require.NoError(t, s.Put(ctx, fmt.Sprintf("k%02d", i), Record{"f": []byte(strings.Repeat("v", 190))}))
	}
	require.NoError(t, s.Put(ctx, "z", Record{"f": []byte(strings.Repeat("w", 3000))}))
	cases := []struct {
		name   string
		start  string
		count  int
		fields []string
		want   int // records returned
		cut    bool
	}{
		{"within", "k00", 3, nil, 3, false},
		{"cut", "k00", 20, nil, 4, true},     // ~200 bytes a record: the fifth would pass 1000
		{"end", "k18", 20, nil, 2, true},     // k18, k19, then z would pass
		{"one large", "z", 5, nil, 1, false}, // over the limit alone: returned, the data ends
		{"few fields", "k00", 20, []string{"none"}, 20, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kvs, cut, err := s.ScanCut(ctx, tc.start, tc.count, tc.fields...)
			require.NoError(t, err)
			assert.Len(t, kvs, tc.want)
			assert.Equal(t, tc.cut, cut)
			wkvs, wcut, err := s.ScanWire(ctx, tc.start, tc.count, tc.fields)
			require.NoError(t, err)
			require.Len(t, wkvs, len(kvs))
			assert.Equal(t, tc.cut, wcut)
			size := 0
			for i, kv := range wkvs {
				assert.Equal(t, kvs[i].Key, kv.Key)
				assert.Equal(t, len(kv.Wire), wireSize(kvs[i].Record), "both forms count the same bytes")
				size += len(kv.Key) + len(kv.Wire)
			}
			if len(wkvs) > 1 {
				assert.LessOrEqual(t, size, 1000)
			}
		})
	}
}

// A Scan run with a ScanRoom stops where the room it was given ends, as
// at MaxScanBytes (at least one record), asking ahead in steps rather
// than for every record (1,000 of them here); ScanCut and ScanWire
// alike.
func TestScanCutByRoom(t *testing.T) {
	s := openTest(t)
	ctx := testCtx(t)
	const n, vsize = 2000, 990
	for i := range n {
		require.NoError(t, s.Put(ctx, fmt.Sprintf("k%04d", i), Record{"f": []byte(strings.Repeat("v", vsize))}))
	}
	rec := len("k0000") + wireSize(Record{"f": make([]byte, vsize)})
	cases := []struct {
		name  string
		room  int // bytes the room grants
		want  int // records returned
		cut   bool
		asked int // at most this many questions
	}{
		{"all fits", 4 << 20, n, false, 8},
		{"cut", 1 << 20, 1 << 20 / rec, true, 24},
		{"none fits", 0, 1, true, 10}, // at least one record
		{"within the first step", 300 << 10, 300 << 10 / rec, true, 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, wire := range []bool{false, true} {
				asked := 0
				rctx := WithScanRoom(ctx, func(bytes, records int) bool {
					asked++
					require.Positive(t, records)
					return bytes <= tc.room
				})
				var got int
				var cut bool
				if wire {
					kvs, c, err := s.ScanWire(rctx, "", n, nil)
					require.NoError(t, err)
					got, cut = len(kvs), c
				} else {
					kvs, c, err := s.ScanCut(rctx, "", n)
					require.NoError(t, err)
					got, cut = len(kvs), c
				}
				assert.Equal(t, tc.want, got, "wire %v", wire)
				assert.Equal(t, tc.cut, cut, "wire %v", wire)
				assert.LessOrEqual(t, asked, tc.asked, "wire %v", wire)
			}
		})
	}
}
