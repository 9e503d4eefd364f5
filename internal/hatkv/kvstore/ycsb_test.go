package kvstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storeDB runs YCSB directly against the store, without RPC.
type storeDB struct{ s *kvstore.Store }

func (d storeDB) Read(ctx context.Context, key string, fields []string) (map[string][]byte, error) {
	return d.s.Get(ctx, key, fields...)
}

func (d storeDB) Update(ctx context.Context, key string, values map[string][]byte) error {
	return d.s.Put(ctx, key, values)
}

func (d storeDB) Insert(ctx context.Context, key string, values map[string][]byte) error {
	return d.s.Insert(ctx, key, values)
}

func (d storeDB) Scan(ctx context.Context, start string, count int, fields []string) ([]map[string][]byte, error) {
	kvs, err := d.s.Scan(ctx, start, count, fields...)
	if err != nil {
		return nil, err
	}
	out := make([]map[string][]byte, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Record
	}
	return out, nil
}

func (d storeDB) MultiRead(ctx context.Context, keys []string, fields []string) ([]map[string][]byte, error) {
	recs, err := d.s.MultiGet(ctx, keys, fields...)
	if err != nil {
		return nil, err
	}
	out := make([]map[string][]byte, len(recs))
	for i, r := range recs {
		if r == nil {
			return nil, fmt.Errorf("key %s: %w", keys[i], kvstore.ErrNotFound)
		}
		out[i] = r
	}
	return out, nil
}

func (d storeDB) MultiUpdate(ctx context.Context, keys []string, values []map[string][]byte) error {
	kvs := make([]kvstore.KV, len(keys))
	for i, k := range keys {
		kvs[i] = kvstore.KV{Key: k, Record: values[i]}
	}
	return d.s.MultiPut(ctx, kvs)
}

func workload(t testing.TB, name string, set map[string]string) *ycsb.Workload {
	t.Helper()
	p := ycsb.NewProperties()
	require.NoError(t, p.LoadWorkload(name))
	for k, v := range set {
		p.Set(k, v)
	}
	cfg, err := ycsb.ParseConfig(p)
	require.NoError(t, err)
	w, err := ycsb.NewWorkload(cfg)
	require.NoError(t, err)
	return w
}

func TestYCSBWorkloadsAgainstStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, commit := range []kvstore.CommitMode{kvstore.CommitImmediate, kvstore.CommitGroup} {
		for _, name := range ycsb.WorkloadNames() {
			t.Run(fmt.Sprintf("%s/%s", commit, name), func(t *testing.T) {
				s, err := kvstore.Open(ctx, t.TempDir(), kvstore.WithSync(kvstore.SyncNoSync), kvstore.WithCommit(commit), kvstore.WithMapSize(64<<20))
				require.NoError(t, err)
				defer s.Close()
				w := workload(t, name, map[string]string{"operationcount": "2000"})
				db := storeDB{s}
				_, err = ycsb.Run(ctx, db, w, ycsb.RunOptions{Threads: 8, Load: true, Seed: 1}, ycsb.NewMeasurements())
				require.NoError(t, err)
				st, err := s.Stats(ctx)
				require.NoError(t, err)
				require.EqualValues(t, 1000, st.Records)

				rep, err := ycsb.Run(ctx, db, w, ycsb.RunOptions{Threads: 8, Seed: 2}, ycsb.NewMeasurements())
				require.NoError(t, err)
				assert.EqualValues(t, 2000, rep.Operations)
				for _, op := range rep.Ops {
					assert.Zero(t, op.Errors, op.Operation)
				}
			})
		}
	}
}

// BenchmarkYCSB runs the paper's HatKV workloads in process (no RPC):
// throughput of the storage layer alone, 32 client goroutines.
func BenchmarkYCSB(b *testing.B) {
	for _, name := range []string{"workloada_hatkv", "workloadb_hatkv"} {
		for _, commit := range []kvstore.CommitMode{kvstore.CommitImmediate, kvstore.CommitGroup} {
			for _, sync := range []kvstore.SyncMode{kvstore.SyncAlways, kvstore.SyncNoSync} {
				b.Run(fmt.Sprintf("%s/commit=%s/sync=%s", name, commit, sync), func(b *testing.B) {
					ctx := context.Background()
					s, err := kvstore.Open(ctx, b.TempDir(), kvstore.WithSync(sync), kvstore.WithCommit(commit), kvstore.WithMapSize(256<<20))
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					w := workload(b, name, map[string]string{"recordcount": "10000"})
					db := storeDB{s}
					if _, err := ycsb.Run(ctx, db, w, ycsb.RunOptions{Threads: 8, Load: true, Seed: 1}, ycsb.NewMeasurements()); err != nil {
						b.Fatal(err)
					}
					m := ycsb.NewMeasurements()
					b.ResetTimer()
					rep, err := ycsb.Run(ctx, db, w, ycsb.RunOptions{Threads: 32, Operations: int64(b.N), Seed: 2}, m)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(rep.Throughput, "ops/s")
					for _, op := range rep.Ops {
						if op.Errors > 0 {
							b.Fatalf("%s: %d errors", op.Operation, op.Errors)
						}
						b.ReportMetric(op.P99Us, op.Operation+"-p99-us")
					}
				})
			}
		}
	}
}
