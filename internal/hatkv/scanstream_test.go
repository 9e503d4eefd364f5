package hatkv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func scanKey(i int) string { return fmt.Sprintf("k%08d", i) }

// loadRecords writes n records k00000000.. with one field of vsize bytes.
func loadRecords(t testing.TB, kv KV, n, vsize int) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	val := make([]byte, vsize)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	for lo := 0; lo < n; lo += 1000 {
		var recs []*hatkv.KeyRecord
		for i := lo; i < min(n, lo+1000); i++ {
			recs = append(recs, &hatkv.KeyRecord{Key: scanKey(i), Record: hatkv.Record{"f": val}})
		}
		require.NoError(t, kv.MultiPut(ctx, recs))
	}
}

// pagedScan reads [start, end) with Scan pages of 10,000 records.
func pagedScan(t testing.TB, kv KV, start, end string, limit int64) []*hatkv.KeyRecord {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	var out []*hatkv.KeyRecord
	for {
		page, err := kv.Scan(ctx, start, 10000, nil)
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		for _, r := range page {
			if (end != "" && r.Key >= end) || (limit > 0 && int64(len(out)) == limit) {
				return out
			}
			out = append(out, r)
		}
		start = page[len(page)-1].Key + "\x00"
	}
}

// streamAll reads a ScanStream to its end and returns the records and
// each message's record count.
func streamAll(t testing.TB, kv KV, req *hatkv.ScanRequest) ([]*hatkv.KeyRecord, []int, error) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	st, err := kv.ScanStream(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	var (
		out     []*hatkv.KeyRecord
		batches []int
	)
	for {
		b, err := st.Recv()
		if err == io.EOF {
			return out, batches, nil
		}
		if err != nil {
			return out, batches, err
		}
		out = append(out, b.Records...)
		batches = append(batches, len(b.Records))
	}
}

// streamInto is streamAll reading every message into one batch
// (RecvInto); it returns the records' keys.
func streamInto(t testing.TB, kv KV, req *hatkv.ScanRequest) ([]string, error) {
	t.Helper()
	st, err := kv.ScanStream(testCtx(t, 2*time.Minute), req)
	if err != nil {
		return nil, err
	}
	var keys []string
	b := &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{{Key: "stale"}}}
	for {
		if err := st.RecvInto(b); err == io.EOF {
			return keys, nil
		} else if err != nil {
			return keys, err
		}
		for _, r := range b.Records {
			keys = append(keys, r.Key)
		}
	}
}

// TestScanStreamMatchesScan: a streamed scan returns exactly what paging
// with Scan returns, cut into the batches asked for.
func TestScanStreamMatchesScan(t *testing.T) {
	const per = 16 // batch_records of the boundary cases
	tests := []struct {
		name    string
		n       int
		req     *hatkv.ScanRequest
		want    int   // records
		batches []int // nil: not checked
	}{
		{name: "empty store", n: 0, req: &hatkv.ScanRequest{}, want: 0, batches: []int{}},
		{name: "empty range", n: 100, req: &hatkv.ScanRequest{StartKey: scanKey(50), EndKey: scanKey(50)}, want: 0, batches: []int{}},
		{name: "range past the last key", n: 100, req: &hatkv.ScanRequest{StartKey: "z"}, want: 0, batches: []int{}},
		{name: "one record", n: 1, req: &hatkv.ScanRequest{}, want: 1, batches: []int{1}},
		{name: "batch-1", n: per - 1, req: &hatkv.ScanRequest{BatchRecords: per}, want: per - 1, batches: []int{per - 1}},
		{name: "batch", n: per, req: &hatkv.ScanRequest{BatchRecords: per}, want: per, batches: []int{per}},
		{name: "batch+1", n: per + 1, req: &hatkv.ScanRequest{BatchRecords: per}, want: per + 1, batches: []int{per, 1}},
		{name: "range", n: 1000, req: &hatkv.ScanRequest{StartKey: scanKey(100), EndKey: scanKey(900), BatchRecords: 300}, want: 800, batches: []int{300, 300, 200}},
		{name: "range between keys", n: 100, req: &hatkv.ScanRequest{StartKey: scanKey(10) + "x", EndKey: scanKey(20) + "x"}, want: 10, batches: []int{10}},
		{name: "limit", n: 1000, req: &hatkv.ScanRequest{Limit: 123, BatchRecords: 100}, want: 123, batches: []int{100, 23}},
		{name: "limit at a batch's end", n: 1000, req: &hatkv.ScanRequest{Limit: 200, BatchRecords: 100}, want: 200, batches: []int{100, 100}},
		{name: "batch above the server's cap", n: 3000, req: &hatkv.ScanRequest{BatchRecords: 5000}, want: 3000, batches: []int{1024, 1024, 952}},
		{name: "100,000 records", n: 100000, req: &hatkv.ScanRequest{}, want: 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, "")
			loadRecords(t, ts.kv, tt.n, 20)
			got, batches, err := streamAll(t, ts.kv, tt.req)
			require.NoError(t, err)
			want := pagedScan(t, ts.kv, tt.req.StartKey, tt.req.EndKey, tt.req.Limit)
			require.Len(t, got, tt.want)
			require.Equal(t, len(want), len(got))
			for i := range want {
				require.Equal(t, want[i].Key, got[i].Key, "record %d", i)
				require.Equal(t, want[i].Record, got[i].Record, "record %d", i)
			}
			if tt.batches != nil {
				require.Equal(t, tt.batches, append([]int{}, batches...))
			}
		})
	}
}

// TestScanStreamBatchBytes: by default a batch ends with the record that
// takes its keys and records to 64 KiB.
func TestScanStreamBatchBytes(t *testing.T) {
	ts := startServer(t, "")
	const vsize = 1000
	loadRecords(t, ts.kv, 300, vsize)
	got, batches, err := streamAll(t, ts.kv, &hatkv.ScanRequest{Fields: []string{"f"}})
	require.NoError(t, err)
	require.Len(t, got, 300)
	rec := len(scanKey(0)) + 6 + 8 + len("f") + vsize // key + wire form
	full := (kvstore.StreamBatchBytes + rec - 1) / rec
	want := []int{full, full, full, full}
	want = append(want, 300-4*full)
	require.Equal(t, want, batches)
}

// TestScanStreamBadRequest: a range or sizes that make no sense are an
// InvalidArgument naming them.
func TestScanStreamBadRequest(t *testing.T) {
	ts := startServer(t, "")
	loadRecords(t, ts.kv, 10, 20)
	tests := []struct {
		req  *hatkv.ScanRequest
		want string
	}{
		{&hatkv.ScanRequest{StartKey: "b", EndKey: "a"}, `bad scan range: end key "a" is before start key "b"`},
		{&hatkv.ScanRequest{Limit: -1}, "bad scan range: limit -1 is negative (0: no limit)"},
		{&hatkv.ScanRequest{BatchRecords: -2}, "bad scan range: batch of -2 records is negative (0: the server's batch)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got, _, err := streamAll(t, ts.kv, tt.req)
			var bad *hatkv.InvalidArgument
			require.ErrorAs(t, err, &bad)
			assert.Equal(t, tt.want, bad.Message)
			assert.Empty(t, got)
		})
	}
}

// streamMessagesOut is how many ScanStream messages the server sent.
func streamMessagesOut(t testing.TB, ts *testServer) float64 {
	t.Helper()
	mfs, err := ts.srv.rpc.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "hatrpc_server_stream_messages_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labels(m)["function"] == "ScanStream" && labels(m)["direction"] == "out" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// streamWindow is the receive window per stream, in messages, the slow
// reader's client grants (client.WithStreamWindow; the default window is
// one of bytes, a range's worth of small batches).
const streamWindow = 16

// TestScanStreamSlowReader: a client that stops reading stops the server
// at its window — 16 messages, whatever is left of the range — and the
// server holds no LMDB read transaction while it waits: writes commit and
// the store checks clean. Reading on then finishes the scan.
func TestScanStreamSlowReader(t *testing.T) {
	ts := startServer(t, "")
	loadRecords(t, ts.kv, 2000, 20)
	ctx := testCtx(t, time.Minute)
	slow, err := Dial(ctx, ts.addr, WithClientOptions(client.WithStreamWindow(streamWindow, 0, 0)))
	require.NoError(t, err)
	t.Cleanup(func() { closeWithin(t, slow, 10*time.Second) })
	st, err := slow.KV().ScanStream(ctx, &hatkv.ScanRequest{BatchRecords: 10})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return streamMessagesOut(t, ts) == streamWindow }, testenv.HangGuard(30*time.Second), time.Millisecond)
	require.Equal(t, 0, ts.srv.store.ReadTxns(), "a blocked stream holds a read transaction")
	require.NoError(t, ts.kv.Put(ctx, "a-new-key", hatkv.Record{"f": []byte("v")}))
	rep, err := kvstore.Check(ctx, ts.srv.store.Path())
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
	// The window bounds what was sent while nobody read.
	require.Equal(t, float64(streamWindow), streamMessagesOut(t, ts))
	n := 0
	for {
		b, err := st.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		n += len(b.Records)
	}
	// The new key sorts before the scan's position: each batch is its own
	// snapshot, and this one was read before the write.
	require.Equal(t, 2000, n)
}

// TestScanStreamClientGoes: a client that cancels mid-stream, or whose
// connection drops (a killed client), ends the server's handler: no read
// transaction stays open, writes and a check proceed, and no goroutine
// is left (TestMain's leak check).
func TestScanStreamClientGoes(t *testing.T) {
	tests := []struct {
		name string
		stop func(cancel context.CancelFunc, conn *client.Conn)
	}{
		{"cancel", func(cancel context.CancelFunc, _ *client.Conn) { cancel() }},
		{"connection dropped", func(_ context.CancelFunc, conn *client.Conn) { require.NoError(t, conn.Close()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, "")
			loadRecords(t, ts.kv, 5000, 20)
			// A window of 16 messages, far less than the range's 500:
			// the default window (bytes) holds the whole range, which the
			// server would send before the client goes.
			c, err := Dial(testCtx(t, 30*time.Second), ts.addr, WithClientOptions(client.WithStreamWindow(streamWindow, 0, 0)))
			require.NoError(t, err)
			defer closeWithin(t, c, 10*time.Second)
			ctx, cancel := context.WithCancel(testCtx(t, time.Minute))
			defer cancel()
			st, err := c.KV().ScanStream(ctx, &hatkv.ScanRequest{BatchRecords: 10})
			require.NoError(t, err)
			b, err := st.Recv()
			require.NoError(t, err)
			require.Len(t, b.Records, 10)
			tt.stop(cancel, c.conns[0])
			for err == nil {
				_, err = st.Recv()
			}
			require.NotErrorIs(t, err, io.EOF)
			require.Eventually(t, func() bool {
				mfs, err := ts.srv.rpc.Registry().Gather()
				require.NoError(t, err)
				for _, mf := range mfs {
					if mf.GetName() == "hatrpc_server_streams_open" {
						for _, m := range mf.GetMetric() {
							if m.GetGauge().GetValue() != 0 {
								return false
							}
						}
					}
				}
				return true
			}, testenv.HangGuard(30*time.Second), time.Millisecond, "the server's stream handler did not end")
			require.Less(t, streamMessagesOut(t, ts), float64(500), "the server streamed on after the client went")
			require.Equal(t, 0, ts.srv.store.ReadTxns())
			wctx := testCtx(t, 30*time.Second)
			require.NoError(t, ts.kv.Put(wctx, "after", hatkv.Record{"f": []byte("v")}))
			rep, err := kvstore.Check(wctx, ts.srv.store.Path())
			require.NoError(t, err)
			require.Empty(t, rep.Problems)
		})
	}
}

// TestClusterScanStream: over three servers the merged stream is every
// record in key order, as one server holding them all would stream it.
func TestClusterScanStream(t *testing.T) {
	servers, cl := startCluster(t, 3)
	const n = 3000
	loadRecords(t, cl, n, 20)
	for _, ts := range servers {
		st, err := ts.kv.Stats(testCtx(t, 10*time.Second))
		require.NoError(t, err)
		require.Greater(t, st.Records, int64(n/6), "the ring put too few keys on %s", ts.addr)
	}
	tests := []struct {
		name string
		req  *hatkv.ScanRequest
		want []string
	}{
		{"all", &hatkv.ScanRequest{BatchRecords: 7}, keyRange(0, n)},
		{"range", &hatkv.ScanRequest{StartKey: scanKey(100), EndKey: scanKey(250)}, keyRange(100, 250)},
		{"limit", &hatkv.ScanRequest{StartKey: scanKey(10), Limit: 33, BatchRecords: 5}, keyRange(10, 43)},
		{"empty", &hatkv.ScanRequest{StartKey: "z"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, batches, err := streamAll(t, cl, tt.req)
			require.NoError(t, err)
			var keys []string
			for _, r := range got {
				keys = append(keys, r.Key)
			}
			require.Equal(t, tt.want, keys)
			for _, b := range batches {
				require.LessOrEqual(t, b, max(int(tt.req.BatchRecords), mergedBatch))
			}
			keys, err = streamInto(t, cl, tt.req)
			require.NoError(t, err)
			require.Equal(t, tt.want, keys, "read into one batch")
		})
	}
}

// TestClusterScanStreamServerDown: a server that cannot be reached fails
// the merged stream with an error naming it.
func TestClusterScanStreamServerDown(t *testing.T) {
	servers, _ := startCluster(t, 2)
	cl, err := DialCluster(testCtx(t, 30*time.Second), []string{servers[0].addr, "127.0.0.1:1"})
	require.NoError(t, err)
	defer cl.Close()
	_, _, err = streamAll(t, cl, &hatkv.ScanRequest{})
	var down *ServerDownError
	require.True(t, errors.As(err, &down), "%v", err)
	assert.Equal(t, "127.0.0.1:1", down.Addr)
}

func keyRange(lo, hi int) []string {
	var out []string
	for i := lo; i < hi; i++ {
		out = append(out, scanKey(i))
	}
	return out
}

// decodedStore hides kvstore's wire-form reads, so the service is the
// generated one and ScanStream decodes records into maps.
type decodedStore struct{ Store }

// TestScanStreamDecodedService: Service.ScanStream, behind the generated
// registration, streams what the wire-form service does.
func TestScanStreamDecodedService(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	st, err := kvstore.Open(ctx, t.TempDir(), kvstore.WithSync(kvstore.SyncNoSync), kvstore.WithMapSize(64<<20))
	require.NoError(t, err)
	rpc := server.New(server.WithLogger(quietLogger()))
	Register(rpc, NewService(decodedStore{st}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- rpc.Serve(ln) }()
	conn, err := client.Dial(ctx, ln.Addr().String(), client.WithHints(&hatkv.HatKVHints))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, conn.Close())
		require.NoError(t, rpc.Shutdown(testCtx(t, 10*time.Second)))
		require.ErrorIs(t, <-done, server.ErrServerClosed)
		require.NoError(t, st.Close())
	})
	kv := hatkv.NewHatKVClient(conn)
	loadRecords(t, kv, 33, 20)
	got, batches, err := streamAll(t, kv, &hatkv.ScanRequest{BatchRecords: 16, Fields: []string{"f", "nope"}})
	require.NoError(t, err)
	require.Equal(t, []int{16, 16, 1}, batches)
	require.Equal(t, pagedScan(t, kv, "", "", 0), got)
	_, _, err = streamAll(t, kv, &hatkv.ScanRequest{Limit: -1})
	var bad *hatkv.InvalidArgument
	require.ErrorAs(t, err, &bad)
	require.Equal(t, "bad scan range: limit -1 is negative (0: no limit)", bad.Message)
}
