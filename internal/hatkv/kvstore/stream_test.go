package kvstore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScanStreamSnapshotPerBatch: each batch is read in a transaction of
// its own that has ended when send runs (no reader is open then), so
// writes made between batches show in the later ones: a key inserted
// ahead of the scan is returned, one behind it is not, one deleted ahead
// is not, one updated ahead is returned as updated; every key once, in
// order.
func TestScanStreamSnapshotPerBatch(t *testing.T) {
	ctx := testCtx(t)
	s := openTest(t)
	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	for i := 0; i < 100; i += 2 { // even keys k0000..k0098
		require.NoError(t, s.Put(ctx, key(i), Record{"v": []byte("old")}))
	}
	tests := []struct {
		name string
		wire bool
	}{{"wire", true}, {"decoded", false}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				keys    []string
				vals    []string
				batches int
			)
			between := func() error {
				require.Equal(t, 0, s.ReadTxns(), "a read transaction is open while the batch is sent")
				if batches == 1 {
					require.NoError(t, s.Put(ctx, key(1), Record{"v": []byte("behind")}))   // behind the scan
					require.NoError(t, s.Put(ctx, key(51), Record{"v": []byte("ahead")}))   // ahead of it
					require.NoError(t, s.Delete(ctx, key(60)))                              // ahead, deleted
					require.NoError(t, s.Put(ctx, key(70), Record{"v": []byte("updated")})) // ahead, updated
				}
				return nil
			}
			r := ScanRange{BatchRecords: 10}
			var err error
			if tt.wire {
				err = s.ScanStreamWire(ctx, r, func(kvs []WireKV) error {
					batches++
					for _, kv := range kvs {
						rec, derr := DecodeRecord(append([]byte{recordVersion}, kv.Wire...))
						require.NoError(t, derr)
						keys, vals = append(keys, kv.Key), append(vals, string(rec["v"]))
					}
					return between()
				})
			} else {
				err = s.ScanStream(ctx, r, func(kvs []KV) error {
					batches++
					for _, kv := range kvs {
						keys, vals = append(keys, kv.Key), append(vals, string(kv.Record["v"]))
					}
					return between()
				})
			}
			require.NoError(t, err)
			var want, wantVals []string
			for i := 0; i < 100; i += 2 {
				if i == 60 {
					continue
				}
				want = append(want, key(i))
				wantVals = append(wantVals, map[bool]string{true: "updated", false: "old"}[i == 70])
				if i == 50 {
					want, wantVals = append(want, key(51)), append(wantVals, "ahead")
				}
			}
			require.Equal(t, want, keys)
			require.Equal(t, wantVals, vals)
			// Restore for the next case.
			require.NoError(t, s.Delete(ctx, key(1)))
			require.NoError(t, s.Delete(ctx, key(51)))
			require.NoError(t, s.Put(ctx, key(60), Record{"v": []byte("old")}))
			require.NoError(t, s.Put(ctx, key(70), Record{"v": []byte("old")}))
		})
	}
}

// TestScanStreamSendError: an error from send ends the scan with it.
func TestScanStreamSendError(t *testing.T) {
	ctx := testCtx(t)
	s := openTest(t)
	for i := 0; i < 30; i++ {
		require.NoError(t, s.Put(ctx, fmt.Sprintf("k%02d", i), Record{"v": []byte("x")}))
	}
	stop := fmt.Errorf("client gone")
	n := 0
	err := s.ScanStream(ctx, ScanRange{BatchRecords: 10}, func(kvs []KV) error {
		n += len(kvs)
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 10, n)
	require.Equal(t, 0, s.ReadTxns())
}
