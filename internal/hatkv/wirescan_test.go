package hatkv

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// wireStreamer is what Client and Cluster share for ScanStreamWire.
type wireStreamer interface {
	ScanStreamWire(ctx context.Context, req *hatkv.ScanRequest) (WireStream, error)
}

// wireAll reads a WireStream to its end through one reused batch and
// returns the records (copied out) and each message's record count.
func wireAll(t testing.TB, ws wireStreamer, req *hatkv.ScanRequest) ([]*hatkv.KeyRecord, []int, error) {
	t.Helper()
	st, err := ws.ScanStreamWire(testCtx(t, 2*time.Minute), req)
	if err != nil {
		return nil, nil, err
	}
	var (
		b       WireBatch
		out     = []*hatkv.KeyRecord{}
		batches []int
	)
	for {
		err := st.Recv(&b)
		if err == io.EOF {
			return out, batches, nil
		}
		if err != nil {
			return out, batches, err
		}
		out = append(out, recordsOf(&b)...)
		batches = append(batches, len(b.Records))
	}
}

// wideRecords writes n records of three fields (names out of order in the
// map) through kv.
func wideRecords(t testing.TB, kv KV, n int) {
	t.Helper()
	var recs []*hatkv.KeyRecord
	for i := range n {
		recs = append(recs, &hatkv.KeyRecord{Key: scanKey(i), Record: hatkv.Record{"z": []byte("last"), "a": {byte(i), 0}, "m": wideRecord(1, 200)["field0"]}})
	}
	require.NoError(t, kv.MultiPut(testCtx(t, time.Minute), recs))
}

// TestScanStreamWire: read as WireBatches, a streamed scan is the same
// records in the same batches as the generated ScanStream, for one server
// and merged over three, and it ends with the same InvalidArgument.
func TestScanStreamWire(t *testing.T) {
	ts := startServer(t, "")
	servers, cl := startCluster(t, 3)
	wideRecords(t, ts.kv, 1000)
	wideRecords(t, cl, 1000)
	tests := []struct {
		name string
		kv   KV
		ws   wireStreamer
	}{
		{"one server", ts.kv, ts.client},
		{"one server through a cluster", nil, nil},
		{"three servers", cl, cl},
	}
	one, err := DialCluster(testCtx(t, 30*time.Second), []string{servers[0].addr})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, one.Close()) })
	tests[1].kv, tests[1].ws = one, one
	reqs := []*hatkv.ScanRequest{
		{},
		{StartKey: scanKey(100), EndKey: scanKey(900), BatchRecords: 7},
		{Fields: []string{"z", "a"}, Limit: 333},
		{StartKey: "zz"},
	}
	// Where the server grants lanes (shm here, rdma in the Soft-RoCE
	// VM), the wire stream takes the lane the generated one takes.
	lanes := fastpath.Lanes(ts.client.Plan("HatKV:ScanStream").Transport)
	lane0, _ := ts.client.conns[0].StreamRoutes()
	defer func() {
		lane1, tcp1 := ts.client.conns[0].StreamRoutes()
		t.Logf("transport %v: streams on lanes %d, over TCP %d", ts.client.Plan("HatKV:ScanStream").Transport, lane1, tcp1)
		if lanes {
			// Each request streamed both ways, and the bad range's wire stream.
			assert.Equal(t, lane0+uint64(2*len(reqs)+1), lane1, "streams that did not take lanes")
		}
	}()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, req := range reqs {
				want, wantBatches, err := streamAll(t, tt.kv, req)
				require.NoError(t, err)
				got, batches, err := wireAll(t, tt.ws, req)
				require.NoError(t, err)
				require.Equal(t, normalize(want), got, "%+v", req)
				require.Equal(t, wantBatches, batches, "%+v", req)
			}
			_, _, err := wireAll(t, tt.ws, &hatkv.ScanRequest{StartKey: "b", EndKey: "a"})
			var bad *hatkv.InvalidArgument
			require.ErrorAs(t, err, &bad)
			assert.Equal(t, `bad scan range: end key "a" is before start key "b"`, bad.Message)
		})
	}
}

// TestScanStreamWireDecodedService: against a server that encodes records
// from maps (fields in any order), the wire records hold the same fields.
func TestScanStreamWireDecodedService(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	st, err := kvstore.Open(ctx, t.TempDir(), kvstore.WithSync(kvstore.SyncNoSync), kvstore.WithMapSize(64<<20))
	require.NoError(t, err)
	rpc := server.New(server.WithLogger(quietLogger()))
	Register(rpc, NewService(decodedStore{st}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- rpc.Serve(ln) }()
	c, err := Dial(ctx, ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() {
		closeWithin(t, c, 10*time.Second)
		require.NoError(t, rpc.Shutdown(testCtx(t, 10*time.Second)))
		require.ErrorIs(t, <-done, server.ErrServerClosed)
		require.NoError(t, st.Close())
	})
	wideRecords(t, c.KV(), 50)
	want, _, err := streamAll(t, c.KV(), &hatkv.ScanRequest{BatchRecords: 16})
	require.NoError(t, err)
	got, batches, err := wireAll(t, c, &hatkv.ScanRequest{BatchRecords: 16})
	require.NoError(t, err)
	require.Equal(t, []int{16, 16, 16, 2}, batches)
	require.Equal(t, normalize(want), got)
}

// TestScanStreamMethodMatchesIDL: ScanStreamWire opens the stream the
// generated client opens (the method a stream interceptor sees), and
// interceptors see it as such.
func TestScanStreamMethodMatchesIDL(t *testing.T) {
	ts := startServer(t, "")
	var (
		mu   sync.Mutex
		seen []client.Method
	)
	ic := func(ctx context.Context, m *client.Method, final proto.Struct, next client.StreamOpener) (client.Stream, error) {
		mu.Lock()
		seen = append(seen, *m)
		mu.Unlock()
		return next(ctx, m, final)
	}
	c, err := Dial(testCtx(t, 30*time.Second), ts.addr, WithClientOptions(client.WithStreamInterceptors(ic)))
	require.NoError(t, err)
	t.Cleanup(func() { closeWithin(t, c, 10*time.Second) })
	_, _, err = streamAll(t, c.KV(), &hatkv.ScanRequest{})
	require.NoError(t, err)
	_, _, err = wireAll(t, c, &hatkv.ScanRequest{})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 2)
	assert.Equal(t, seen[0], seen[1])
	assert.Equal(t, scanStreamMethod, seen[1])
}

// TestWireOfStreamError: a decoded stream's error reaches WireOf's Recv.
func TestWireOfStreamError(t *testing.T) {
	ws := WireOf(failingStream{})
	var b WireBatch
	require.ErrorIs(t, ws.Recv(&b), io.ErrUnexpectedEOF)
	ws = WireOf(nilRecordStream{})
	require.EqualError(t, ws.Recv(&b), "hatkv: scan stream: record 1 of the batch is nil")
}

type failingStream struct{ hatkv.HatKVScanStreamClient }

func (failingStream) Recv() (*hatkv.ScanBatch, error) { return nil, io.ErrUnexpectedEOF }

type nilRecordStream struct{ hatkv.HatKVScanStreamClient }

func (nilRecordStream) Recv() (*hatkv.ScanBatch, error) {
	return &hatkv.ScanBatch{Records: []*hatkv.KeyRecord{{Key: "a"}, nil}}, nil
}
