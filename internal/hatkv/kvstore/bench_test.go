package kvstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

const benchRecords = 10000

func benchKey(i int) string { return fmt.Sprintf("user%020d", i) }

func benchStore(b *testing.B, sync SyncMode, commit CommitMode) *Store {
	b.Helper()
	s, err := Open(context.Background(), b.TempDir(), WithSync(sync), WithCommit(commit), WithMapSize(512<<20))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	kvs := make([]KV, 0, 500)
	rec := ycsbRecord("bench", 10, 100)
	for i := 0; i < benchRecords; i++ {
		kvs = append(kvs, KV{Key: benchKey(i), Record: rec})
		if len(kvs) == cap(kvs) {
			if err := s.MultiPut(context.Background(), kvs); err != nil {
				b.Fatal(err)
			}
			kvs = kvs[:0]
		}
	}
	return s
}

var benchSyncs = []SyncMode{SyncAlways, SyncNoMetaSync, SyncNoSync}
var benchCommits = []CommitMode{CommitImmediate, CommitGroup}

// BenchmarkPut issues YCSB updates (one 100-byte field merged into a
// 10-field record) from 8 goroutines per core, so group commit has
// concurrent writers to batch.
func BenchmarkPut(b *testing.B) {
	for _, commit := range benchCommits {
		for _, sync := range benchSyncs {
			b.Run(fmt.Sprintf("commit=%s/sync=%s", commit, sync), func(b *testing.B) {
				s := benchStore(b, sync, commit)
				ctx := context.Background()
				var seed atomic.Uint64
				b.SetParallelism(8)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(seed.Add(1), 7))
					val := Record{"field3": make([]byte, 100)}
					for pb.Next() {
						if err := s.Put(ctx, benchKey(rng.IntN(benchRecords)), val); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				st, err := s.Stats(ctx)
				if err == nil && st.Commits > 0 {
					b.ReportMetric(float64(st.BatchedWrites)/float64(st.Commits), "writes/commit")
				}
			})
		}
	}
}

func BenchmarkGet(b *testing.B) {
	for _, commit := range benchCommits {
		b.Run(fmt.Sprintf("commit=%s", commit), func(b *testing.B) {
			s := benchStore(b, SyncNoSync, commit)
			ctx := context.Background()
			var seed atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(seed.Add(1), 9))
				for pb.Next() {
					if _, err := s.Get(ctx, benchKey(rng.IntN(benchRecords))); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMultiGet reads batches of 10 records (the paper's batch size).
func BenchmarkMultiGet(b *testing.B) {
	for _, commit := range benchCommits {
		b.Run(fmt.Sprintf("commit=%s", commit), func(b *testing.B) {
			s := benchStore(b, SyncNoSync, commit)
			ctx := context.Background()
			var seed atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(seed.Add(1), 11))
				keys := make([]string, 10)
				for pb.Next() {
					for i := range keys {
						keys[i] = benchKey(rng.IntN(benchRecords))
					}
					if _, err := s.MultiGet(ctx, keys); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMultiPut merges batches of 10 records in one transaction.
func BenchmarkMultiPut(b *testing.B) {
	for _, commit := range benchCommits {
		b.Run(fmt.Sprintf("commit=%s/sync=always", commit), func(b *testing.B) {
			s := benchStore(b, SyncAlways, commit)
			ctx := context.Background()
			var seed atomic.Uint64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(seed.Add(1), 13))
				kvs := make([]KV, 10)
				val := Record{"field1": make([]byte, 100)}
				for pb.Next() {
					for i := range kvs {
						kvs[i] = KV{Key: benchKey(rng.IntN(benchRecords)), Record: val}
					}
					if err := s.MultiPut(ctx, kvs); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkScanStreamWire streams the whole store as a streamed scan's
// server reads it (batches of wire forms); one op is one record.
func BenchmarkScanStreamWire(b *testing.B) {
	s := benchStore(b, SyncNoSync, CommitImmediate)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		err := s.ScanStreamWire(ctx, ScanRange{Limit: int64(min(b.N-done, benchRecords))}, func(kvs []WireKV) error {
			done += len(kvs)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
