package hatkv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
)

func rec(kv ...string) hatkv.Record {
	r := hatkv.Record{}
	for i := 0; i+1 < len(kv); i += 2 {
		r[kv[i]] = []byte(kv[i+1])
	}
	return r
}

func TestEndToEnd(t *testing.T) {
	ts := startServer(t, "")
	kv := ts.kv
	ctx := testCtx(t, 20*time.Second)

	require.NoError(t, kv.Put(ctx, "user1", rec("f0", "a", "f1", "b")))
	require.NoError(t, kv.Put(ctx, "user2", rec("f0", "c")))
	require.NoError(t, kv.Put(ctx, "user1", rec("f1", "B", "f2", "z")), "put merges fields")

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"get all fields", func(t *testing.T) {
			got, err := kv.Get(ctx, "user1", nil)
			require.NoError(t, err)
			assert.Equal(t, rec("f0", "a", "f1", "B", "f2", "z"), got)
		}},
		{"get some fields", func(t *testing.T) {
			got, err := kv.Get(ctx, "user1", []string{"f2", "nope"})
			require.NoError(t, err)
			assert.Equal(t, rec("f2", "z"), got)
		}},
		{"multiput then multiget with a missing key", func(t *testing.T) {
			require.NoError(t, kv.MultiPut(ctx, []*hatkv.KeyRecord{
				{Key: "user3", Record: rec("f0", "x")},
				{Key: "user4", Record: rec("f0", "y", "f9", "w")},
			}))
			got, err := kv.MultiGet(ctx, []string{"user4", "absent", "user3"}, nil)
			require.NoError(t, err)
			require.Len(t, got, 3)
			assert.Equal(t, &hatkv.Lookup{Found: true, Record: rec("f0", "y", "f9", "w")}, got[0])
			assert.False(t, got[1].Found)
			assert.Equal(t, rec("f0", "x"), got[2].Record)
		}},
		{"scan in key order from a start key", func(t *testing.T) {
			got, err := kv.Scan(ctx, "user2", 2, []string{"f0"})
			require.NoError(t, err)
			require.Len(t, got, 2)
			assert.Equal(t, "user2", got[0].Key)
			assert.Equal(t, "user3", got[1].Key)
			assert.Equal(t, rec("f0", "x"), got[1].Record)
		}},
		{"scan past the end is short, not an error", func(t *testing.T) {
			got, err := kv.Scan(ctx, "user3", 100, nil)
			require.NoError(t, err)
			assert.Len(t, got, 2)
			got, err = kv.Scan(ctx, "zzz", 10, nil)
			require.NoError(t, err)
			assert.Empty(t, got)
		}},
		{"delete then get is NotFound", func(t *testing.T) {
			require.NoError(t, kv.Delete(ctx, "user2"))
			_, err := kv.Get(ctx, "user2", nil)
			var nf *hatkv.NotFound
			require.ErrorAs(t, err, &nf)
			assert.Equal(t, "user2", nf.Key)
			assert.Contains(t, nf.Message, `"user2" not found`)
		}},
		{"stats", func(t *testing.T) {
			st, err := kv.Stats(ctx)
			require.NoError(t, err)
			assert.Equal(t, int64(3), st.Records)
			assert.Equal(t, "nosync", st.SyncMode)
			assert.Equal(t, "group", st.CommitMode, "commit mode comes from the IDL hint")
			assert.Equal(t, int32(128+2), st.MaxReaders, "reader slots come from the concurrency hint")
			assert.Positive(t, st.Puts)
			assert.Equal(t, int64(1), st.Deletes)
			assert.Positive(t, st.MaxKeySize)
		}},
	}
	for _, s := range steps {
		t.Run(s.name, s.run)
	}
}

func TestBadInput(t *testing.T) {
	ts := startServer(t, "", WithLimits(kvstore.Limits{MaxBatch: 16}))
	kv := ts.kv
	ctx := testCtx(t, 30*time.Second)
	longKey := strings.Repeat("k", 600)
	huge := bytes.Repeat([]byte("v"), 5<<20)
	batch := make([]*hatkv.KeyRecord, 17)
	for i := range batch {
		batch[i] = &hatkv.KeyRecord{Key: fmt.Sprint("b", i), Record: rec("f", "v")}
	}
	tests := []struct {
		name    string
		call    func() error
		wantMsg string
	}{
		{"empty key get", func() error { _, err := kv.Get(ctx, "", nil); return err }, "empty key"},
		{"empty key put", func() error { return kv.Put(ctx, "", rec("f", "v")) }, "empty key"},
		{"empty key delete", func() error { return kv.Delete(ctx, "") }, "empty key"},
		{"oversized key get", func() error { _, err := kv.Get(ctx, longKey, nil); return err }, "key too long"},
		{"oversized key put", func() error { return kv.Put(ctx, longKey, rec("f", "v")) }, "key length is 600"},
		{"oversized value", func() error { return kv.Put(ctx, "big", hatkv.Record{"f": huge}) }, "record too large"},
		{"put without fields", func() error { return kv.Put(ctx, "k", hatkv.Record{}) }, "no fields"},
		{"empty field name", func() error { return kv.Put(ctx, "k", hatkv.Record{"": []byte("v")}) }, "invalid field name"},
		{"scan count zero", func() error { _, err := kv.Scan(ctx, "a", 0, nil); return err }, "scan count"},
		{"scan count negative", func() error { _, err := kv.Scan(ctx, "a", -5, nil); return err }, "scan count"},
		{"scan count too large", func() error { _, err := kv.Scan(ctx, "a", 1<<30, nil); return err }, "scan count"},
		{"multiget empty key", func() error { _, err := kv.MultiGet(ctx, []string{"a", ""}, nil); return err }, "empty key"},
		{"multiput batch too large", func() error { return kv.MultiPut(ctx, batch) }, "batch size is 17"},
		{"multiput oversized key", func() error {
			return kv.MultiPut(ctx, []*hatkv.KeyRecord{{Key: longKey, Record: rec("f", "v")}})
		}, "key too long"},
		{"multiput empty record", func() error {
			return kv.MultiPut(ctx, []*hatkv.KeyRecord{{Key: "x", Record: hatkv.Record{}}})
		}, "no fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var bad *hatkv.InvalidArgument
			require.ErrorAs(t, err, &bad)
			assert.Contains(t, bad.Message, tt.wantMsg)
		})
	}
	t.Run("missing keys are NotFound", func(t *testing.T) {
		var nf *hatkv.NotFound
		_, err := kv.Get(ctx, "absent", nil)
		require.ErrorAs(t, err, &nf)
		require.ErrorAs(t, kv.Delete(ctx, "absent"), &nf)
	})
	t.Run("server still serves after bad input", func(t *testing.T) {
		require.NoError(t, kv.Put(ctx, "ok", rec("f", "v")))
		got, err := kv.Get(ctx, "ok", nil)
		require.NoError(t, err)
		assert.Equal(t, rec("f", "v"), got)
		st, err := kv.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), st.Records, "no bad request wrote anything")
	})
}

func TestStoreFull(t *testing.T) {
	ts := startServer(t, "", WithSetting("mapsize", "1MiB"), WithSetting("commit", "immediate"))
	kv := ts.kv
	ctx := testCtx(t, 60*time.Second)
	val := bytes.Repeat([]byte("x"), 900)
	var written []string
	var full *hatkv.StoreFull
	for i := 0; ; i++ {
		require.Less(t, i, 100000, "a 1 MiB map never filled up")
		key := fmt.Sprintf("key%06d", i)
		err := kv.Put(ctx, key, hatkv.Record{"f": val})
		if err != nil {
			require.ErrorAs(t, err, &full)
			break
		}
		written = append(written, key)
	}
	require.NotEmpty(t, written)
	assert.Contains(t, full.Message, "store is full")
	assert.Contains(t, full.Message, "reads and deletes still work")

	for _, k := range []string{written[0], written[len(written)/2], written[len(written)-1]} {
		got, err := kv.Get(ctx, k, nil)
		require.NoError(t, err, "reads keep working on a full store")
		assert.Equal(t, val, got["f"])
	}
	got, err := kv.Scan(ctx, "", 5, nil)
	require.NoError(t, err)
	assert.Len(t, got, 5)
	require.ErrorAs(t, kv.MultiPut(ctx, []*hatkv.KeyRecord{{Key: "more", Record: hatkv.Record{"f": val}}}), &full)

	// Deleting frees pages that later writes reuse.
	for _, k := range written[:len(written)/2] {
		require.NoError(t, kv.Delete(ctx, k))
	}
	require.NoError(t, kv.Put(ctx, "after-delete", hatkv.Record{"f": val}))
}

func TestOpenRefusesForeignData(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) string
		want  error
	}{
		{"path is a file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "file")
			require.NoError(t, os.WriteFile(p, []byte("hello"), 0o644))
			return p
		}, kvstore.ErrForeignData},
		{"corrupt data.mdb", func(t *testing.T) string {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "data.mdb"), bytes.Repeat([]byte{0xde, 0xad}, 8192), 0o644))
			return dir
		}, kvstore.ErrCorruptData},
		{"another program's LMDB", func(t *testing.T) string {
			dir := t.TempDir()
			env, err := lmdb.Open(dir)
			require.NoError(t, err)
			defer env.Close()
			require.NoError(t, env.Update(testCtx(t, 10*time.Second), func(txn *lmdb.Txn) error {
				d, err := txn.OpenDBI("", 0)
				if err != nil {
					return err
				}
				return txn.Put(d, []byte("somebody"), []byte("else"), 0)
			}))
			return dir
		}, kvstore.ErrForeignData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.setup(t)
			srv, err := Open(testCtx(t, 10*time.Second), dir, WithLogger(quietLogger()))
			if srv != nil {
				_ = srv.Shutdown(context.Background())
			}
			require.ErrorIs(t, err, tt.want)
			var oe *kvstore.OpenError
			require.ErrorAs(t, err, &oe)
			assert.Contains(t, err.Error(), dir, "the error names the path")
		})
	}
}

func TestOpenTransport(t *testing.T) {
	tests := []struct {
		transport string
		want      error
		offers    string
	}{
		{"auto", nil, "tcp + shm lanes"},
		{"tcp", nil, "tcp"},
		{"TCP", nil, "tcp"},
		{"shm", nil, "tcp + shm lanes"},
		{"rdma", ErrTransportUnavailable, ""}, // no RDMA NIC on the machines these tests run on
		{"carrier-pigeon", ErrConfig, ""},
	}
	if ibvPresent() {
		tests[0].offers = "tcp + rdma lanes"
		tests[4] = struct {
			transport string
			want      error
			offers    string
		}{"rdma", nil, "tcp + rdma lanes"}
	}
	for _, tt := range tests {
		t.Run(tt.transport, func(t *testing.T) {
			err := CheckTransport(tt.transport)
			if tt.want == ErrConfig {
				require.ErrorIs(t, err, ErrConfig)
				assert.Contains(t, err.Error(), "want auto, tcp, shm or rdma")
				return
			}
			require.NoError(t, err)
			srv, err := Open(testCtx(t, 5*time.Second), t.TempDir(), WithTransport(tt.transport))
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want, "refused before the store is opened")
				assert.Contains(t, err.Error(), "transport not available: "+tt.transport)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.offers, srv.Transport())
			require.NoError(t, srv.Shutdown(context.Background()))
		})
	}
}

// ibvPresent reports whether this machine has an RDMA NIC.
func ibvPresent() bool {
	d, err := rdma.Open(rdma.WithProvider(rdma.ProviderIBV))
	if err != nil {
		return false
	}
	_ = d.Close()
	return true
}

func TestDebugEndpoint(t *testing.T) {
	ts := startServer(t, "", WithDebugAddr("127.0.0.1:0"))
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, ts.kv.Put(ctx, "k", rec("f", "v")))
	_, err := ts.kv.Get(ctx, "k", nil)
	require.NoError(t, err)
	addr, err := ts.srv.StartDebug()
	require.NoError(t, err)
	get := func(path string) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	metrics := get("/metrics")
	assert.Contains(t, metrics, "hatkv_store_records 1")
	assert.Contains(t, metrics, `hatkv_store_operations_total{op="put"} 1`)
	assert.Contains(t, metrics, "hatkv_store_max_readers 130")
	assert.Contains(t, metrics, `hatrpc_server_calls_total{function="Get",service="HatKV",transport="`+fastpathtest.Transport()+`"} 1`)
	assert.Contains(t, get("/debug/pprof/"), "goroutine")
	http.DefaultClient.CloseIdleConnections()
}

func TestYCSBAdapter(t *testing.T) {
	ts := startServer(t, "")
	ctx := testCtx(t, 20*time.Second)
	db := YCSB{C: ts.client}
	require.NoError(t, db.Insert(ctx, "u1", map[string][]byte{"a": []byte("1"), "b": []byte("2")}))
	require.NoError(t, db.Update(ctx, "u1", map[string][]byte{"b": []byte("3")}))
	require.NoError(t, db.MultiUpdate(ctx, []string{"u2", "u3"}, []map[string][]byte{{"a": []byte("x")}, {"a": []byte("y")}}))

	got, err := db.Read(ctx, "u1", []string{"b"})
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"b": []byte("3")}, got)

	recs, err := db.Scan(ctx, "u2", 5, nil)
	require.NoError(t, err)
	assert.Equal(t, []map[string][]byte{{"a": []byte("x")}, {"a": []byte("y")}}, recs)

	recs, err = db.MultiRead(ctx, []string{"u3", "u1"}, []string{"a"})
	require.NoError(t, err)
	assert.Equal(t, []map[string][]byte{{"a": []byte("y")}, {"a": []byte("1")}}, recs)

	_, err = db.MultiRead(ctx, []string{"u1", "missing", "gone"}, nil)
	require.ErrorIs(t, err, ErrMissing)
	assert.Contains(t, err.Error(), "2 of 3 keys")

	_, err = db.Read(ctx, "missing", nil)
	var nf *hatkv.NotFound
	require.ErrorAs(t, err, &nf)

	require.Error(t, db.MultiUpdate(ctx, []string{"a", "b"}, []map[string][]byte{{"f": nil}}), "keys and records must pair up")
}

// A batch far over the limit is refused while its arguments are decoded,
// before its key list is allocated; one a little over still gets the
// store's typed error.
func TestHugeBatchRefusedAtDecode(t *testing.T) {
	ts := startServer(t, "")
	ctx := testCtx(t, 30*time.Second)
	keys := func(n int) []string {
		k := make([]string, n)
		for i := range k {
			k[i] = fmt.Sprint("k", i)
		}
		return k
	}
	tests := []struct {
		name    string
		n       int
		decode  bool // refused by the decoder (PROTOCOL_ERROR)
		wantMsg string
	}{
		{"at the limit", 1024, false, ""},
		{"a little over", 1025, false, "batch size is 1025"},
		{"at the decode bound", 4096, false, "batch size is 4096"},
		{"far over", 100000, true, "container size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ts.kv.MultiGet(ctx, keys(tt.n), nil)
			switch {
			case tt.wantMsg == "":
				require.NoError(t, err)
			case tt.decode:
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae)
				assert.Equal(t, proto.ExcProtocolError, ae.Type)
				assert.Contains(t, ae.Message, tt.wantMsg)
			default:
				var bad *hatkv.InvalidArgument
				require.ErrorAs(t, err, &bad)
				assert.Contains(t, bad.Message, tt.wantMsg)
			}
		})
	}
	require.Equal(t, 4096, decodeItems(kvstore.Limits{}))
	require.Equal(t, 8192, decodeItems(kvstore.Limits{MaxBatch: 2048, MaxFields: 16}))
}
