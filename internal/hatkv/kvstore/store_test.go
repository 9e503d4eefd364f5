package kvstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var commitModes = []struct {
	name string
	opts []Option
}{
	{"immediate", []Option{WithCommit(CommitImmediate)}},
	{"group", []Option{WithCommit(CommitGroup)}},
	{"group-linger", []Option{WithCommit(CommitGroup), WithGroupCommit(16, time.Millisecond)}},
	{"writemap-nometasync", []Option{WithWriteMap(true), WithSync(SyncNoMetaSync)}},
}

func TestOperations(t *testing.T) {
	for _, mode := range commitModes {
		t.Run(mode.name, func(t *testing.T) {
			s := openTest(t, mode.opts...)
			ctx := testCtx(t)
			b := func(s string) []byte { return []byte(s) }

			require.NoError(t, s.Insert(ctx, "k1", Record{"a": b("1"), "b": b("2")}))
			require.NoError(t, s.Put(ctx, "k1", Record{"b": b("20"), "c": b("30")}))
			require.NoError(t, s.Insert(ctx, "k2", Record{"a": b("x"), "z": b("y")}))
			require.NoError(t, s.Insert(ctx, "k2", Record{"only": b("o")}))
			require.NoError(t, s.Put(ctx, "k3", Record{"new": b("n")}))
			require.NoError(t, s.MultiPut(ctx, []KV{
				{Key: "m1", Record: Record{"f": b("1")}},
				{Key: "m2", Record: Record{"f": b("2")}},
				{Key: "m1", Record: Record{"g": b("3")}},
			}))

			gets := []struct {
				key    string
				fields []string
				want   Record
				err    error
			}{
				{"k1", nil, Record{"a": b("1"), "b": b("20"), "c": b("30")}, nil},
				{"k1", []string{"b"}, Record{"b": b("20")}, nil},
				{"k1", []string{"nope"}, Record{}, nil},
				{"k2", nil, Record{"only": b("o")}, nil},
				{"k3", nil, Record{"new": b("n")}, nil},
				{"m1", nil, Record{"f": b("1"), "g": b("3")}, nil},
				{"missing", nil, nil, ErrNotFound},
				{"", nil, nil, ErrEmptyKey},
			}
			for _, g := range gets {
				got, err := s.Get(ctx, g.key, g.fields...)
				if g.err != nil {
					require.ErrorIs(t, err, g.err, g.key)
					continue
				}
				require.NoError(t, err, g.key)
				assert.Equal(t, g.want, got, g.key)
			}

			recs, err := s.MultiGet(ctx, []string{"k1", "missing", "m2"}, "f", "a")
			require.NoError(t, err)
			assert.Equal(t, []Record{{"a": b("1")}, nil, {"f": b("2")}}, recs)

			kvs, err := s.Scan(ctx, "k15", 3)
			require.NoError(t, err)
			require.Len(t, kvs, 3)
			assert.Equal(t, []string{"k2", "k3", "m1"}, []string{kvs[0].Key, kvs[1].Key, kvs[2].Key})
			kvs, err = s.Scan(ctx, "", 100, "f")
			require.NoError(t, err)
			assert.Len(t, kvs, 5)
			assert.Equal(t, "k1", kvs[0].Key)
			assert.Equal(t, Record{"f": b("2")}, kvs[4].Record)
			kvs, err = s.Scan(ctx, "zzz", 10)
			require.NoError(t, err)
			assert.Empty(t, kvs)

			require.NoError(t, s.Delete(ctx, "k1"))
			require.ErrorIs(t, s.Delete(ctx, "k1"), ErrNotFound)
			_, err = s.Get(ctx, "k1")
			require.ErrorIs(t, err, ErrNotFound)

			st, err := s.Stats(ctx)
			require.NoError(t, err)
			assert.EqualValues(t, 4, st.Records)
			assert.Positive(t, st.Commits)
			assert.Positive(t, st.UsedBytes)
			assert.EqualValues(t, 64<<20, st.MapSize)
		})
	}
}

func TestLimits(t *testing.T) {
	s := openTest(t, WithLimits(Limits{MaxFields: 4, MaxRecordSize: 1000, MaxScanCount: 50, MaxBatch: 3}))
	ctx := testCtx(t)
	require.Equal(t, 511, s.MaxKeySize())
	require.NoError(t, s.Insert(ctx, "base", Record{"a": {1}, "b": {2}, "c": {3}}))
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"empty key", func() error { return s.Put(ctx, "", Record{"a": {1}}) }, ErrEmptyKey},
		{"max key ok", func() error { return s.Put(ctx, strings.Repeat("k", 511), Record{"a": {1}}) }, nil},
		{"key too long", func() error { return s.Put(ctx, strings.Repeat("k", 512), Record{"a": {1}}) }, ErrKeyTooLong},
		{"get key too long", func() error { _, err := s.Get(ctx, strings.Repeat("k", 600)); return err }, ErrKeyTooLong},
		{"too many fields", func() error { return s.Insert(ctx, "x", Record{"1": {}, "2": {}, "3": {}, "4": {}, "5": {}}) }, ErrTooManyFields},
		{"merge makes too many", func() error { return s.Put(ctx, "base", Record{"d": {4}, "e": {5}}) }, ErrTooManyFields},
		{"record too large", func() error { return s.Insert(ctx, "x", Record{"a": make([]byte, 1000)}) }, ErrValueTooLarge},
		{"empty field name", func() error { return s.Insert(ctx, "x", Record{"": {1}}) }, ErrInvalidField},
		{"scan zero", func() error { _, err := s.Scan(ctx, "a", 0); return err }, ErrScanTooLong},
		{"scan too long", func() error { _, err := s.Scan(ctx, "a", 51); return err }, ErrScanTooLong},
		{"multiget batch", func() error { _, err := s.MultiGet(ctx, []string{"a", "b", "c", "d"}); return err }, ErrBatchTooLarge},
		{"multiput batch", func() error {
			return s.MultiPut(ctx, []KV{{"a", Record{}}, {"b", Record{}}, {"c", Record{}}, {"d", Record{}}})
		}, ErrBatchTooLarge},
		{"multiput bad key", func() error { return s.MultiPut(ctx, []KV{{"a", Record{}}, {"", Record{}}}) }, ErrEmptyKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			var le *LimitError
			if errors.As(err, &le) {
				assert.NotEqual(t, le.Got, le.Max)
				assert.Contains(t, err.Error(), le.What)
			}
		})
	}
	got, err := s.Get(ctx, "base")
	require.NoError(t, err)
	assert.Len(t, got, 3, "rejected merge must not change the record")
}

func TestOpenRefusesForeignData(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) string
		want  []error
	}{
		{"file instead of dir", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "file")
			require.NoError(t, os.WriteFile(p, []byte("hello"), 0o644))
			return p
		}, []error{ErrForeignData}},
		{"random data.mdb", func(t *testing.T) string {
			dir := t.TempDir()
			junk := bytes.Repeat([]byte("not an lmdb file "), 4096)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "data.mdb"), junk, 0o644))
			return dir
		}, []error{ErrCorruptData, lmdb.ErrInvalid}},
		{"tiny data.mdb", func(t *testing.T) string {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "data.mdb"), []byte("0123456789abcdef"), 0o644))
			return dir
		}, []error{ErrCorruptData}},
		{"data.mdb is a directory", func(t *testing.T) string {
			dir := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(dir, "data.mdb"), 0o755))
			return dir
		}, []error{ErrForeignData}},
		{"foreign lmdb env", func(t *testing.T) string {
			dir := t.TempDir()
			env, err := lmdb.Open(dir)
			require.NoError(t, err)
			defer env.Close()
			require.NoError(t, env.Update(testCtx(t), func(txn *lmdb.Txn) error {
				d, err := txn.OpenDBI("", 0)
				if err != nil {
					return err
				}
				return txn.Put(d, []byte("somebody"), []byte("else"), 0)
			}))
			return dir
		}, []error{ErrForeignData}},
		{"foreign lmdb with conflicting key", func(t *testing.T) string {
			dir := t.TempDir()
			env, err := lmdb.Open(dir)
			require.NoError(t, err)
			defer env.Close()
			require.NoError(t, env.Update(testCtx(t), func(txn *lmdb.Txn) error {
				d, err := txn.OpenDBI("", 0)
				if err != nil {
					return err
				}
				return txn.Put(d, []byte(metaDBName), []byte("plain value"), 0)
			}))
			return dir
		}, []error{ErrForeignData}},
		{"wrong magic", func(t *testing.T) string {
			dir := t.TempDir()
			env, err := lmdb.Open(dir, lmdb.WithMaxDBs(4))
			require.NoError(t, err)
			defer env.Close()
			require.NoError(t, env.Update(testCtx(t), func(txn *lmdb.Txn) error {
				d, err := txn.OpenDBI(metaDBName, lmdb.Create)
				if err != nil {
					return err
				}
				return txn.Put(d, []byte(identityKey), []byte("OTHER!\x01\x01"), 0)
			}))
			return dir
		}, []error{ErrForeignData}},
		{"newer format", func(t *testing.T) string {
			dir := t.TempDir()
			env, err := lmdb.Open(dir, lmdb.WithMaxDBs(4))
			require.NoError(t, err)
			defer env.Close()
			require.NoError(t, env.Update(testCtx(t), func(txn *lmdb.Txn) error {
				d, err := txn.OpenDBI(metaDBName, lmdb.Create)
				if err != nil {
					return err
				}
				return txn.Put(d, []byte(identityKey), append(append([]byte(nil), identityMagic...), FormatVersion+1, 1), 0)
			}))
			return dir
		}, []error{ErrUnsupportedVersion}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.setup(t)
			s, err := Open(testCtx(t), path)
			if s != nil {
				_ = s.Close()
			}
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			var oe *OpenError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, path, oe.Path)
			assert.Contains(t, err.Error(), path)
		})
	}
}

func TestReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx(t)
	s, err := Open(ctx, dir, WithMapSize(8<<20))
	require.NoError(t, err)
	require.NoError(t, s.Insert(ctx, "k", Record{"f": []byte("v")}))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Put(ctx, "k", Record{}), ErrClosed)
	_, err = s.Get(ctx, "k")
	require.ErrorIs(t, err, ErrClosed)

	s, err = Open(ctx, dir, WithMapSize(8<<20))
	require.NoError(t, err)
	defer s.Close()
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, Record{"f": []byte("v")}, got)
}

func TestStoreFull(t *testing.T) {
	for _, mode := range commitModes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			s := openTest(t, append(mode.opts, WithMapSize(1<<20))...)
			ctx := testCtx(t)
			n, err := insertUntilFull(ctx, s)
			require.ErrorIs(t, err, ErrStoreFull)
			assert.Contains(t, err.Error(), "map size")
			require.Greater(t, n, 100)
			got, err := s.Get(ctx, "key000000")
			require.NoError(t, err, "reads must keep working on a full store")
			assert.Len(t, got, 10)
			kvs, err := s.Scan(ctx, "", 10)
			require.NoError(t, err)
			assert.Len(t, kvs, 10)

			for i := 0; i < n/2; i++ {
				require.NoError(t, s.Delete(ctx, fmt.Sprintf("key%06d", i)), "delete %d", i)
			}
			for i := 0; i < n/4; i++ {
				require.NoError(t, s.Insert(ctx, fmt.Sprintf("new%06d", i), ycsbRecord("k", 10, 100)), "insert after delete %d", i)
			}
			st, err := s.Stats(ctx)
			require.NoError(t, err)
			assert.LessOrEqual(t, st.MapSize, int64(1<<20)+8*(1<<20))
		})
	}
}

func TestGroupCommitBatches(t *testing.T) {
	s := openTest(t, WithCommit(CommitGroup), WithGroupCommit(64, 2*time.Millisecond))
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32*20)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				errs <- s.Put(ctx, fmt.Sprintf("g%02d-%02d", g, i), Record{"f": []byte{byte(i)}})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 640, st.Records)
	assert.EqualValues(t, 640, st.BatchedWrites)
	assert.Less(t, st.Commits, uint64(640), "concurrent writes should share commits")
	assert.Greater(t, st.MaxBatch, uint64(1))
	assert.LessOrEqual(t, st.MaxBatch, uint64(64))
}

func TestGroupCommitFailedBatchFailsAll(t *testing.T) {
	s := openTest(t, WithCommit(CommitGroup), WithMapSize(2<<20), WithGroupCommit(8, 5*time.Millisecond))
	ctx := testCtx(t)
	big := Record{"v": make([]byte, 600<<10)}
	require.NoError(t, s.Insert(ctx, "big0", big))
	// The map holds about one more such record: a batch of them overflows
	// and is retried op by op, so the fitting one commits and the others
	// get ErrStoreFull.
	var wg sync.WaitGroup
	results := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.Insert(ctx, fmt.Sprintf("big%d", i+1), big)
		}()
	}
	wg.Wait()
	full := 0
	for i, err := range results {
		if err != nil {
			full++
			require.ErrorIs(t, err, ErrStoreFull, "writer %d", i)
			_, gerr := s.Get(ctx, fmt.Sprintf("big%d", i+1))
			require.ErrorIs(t, gerr, ErrNotFound, "failed write %d must not be visible", i)
		}
	}
	assert.Contains(t, results, error(nil), "retry op by op lets a fitting write through")
	assert.Positive(t, full)
}

func TestContextCancellation(t *testing.T) {
	for _, mode := range commitModes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			s := openTest(t, mode.opts...)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			require.ErrorIs(t, s.Put(ctx, "k", Record{"a": {1}}), context.Canceled)
			_, err := s.Get(ctx, "k")
			require.ErrorIs(t, err, context.Canceled)
			_, err = s.Scan(ctx, "", 1)
			require.ErrorIs(t, err, context.Canceled)
			_, err = s.Get(testCtx(t), "k")
			require.ErrorIs(t, err, ErrNotFound)
		})
	}
}

func TestParseModes(t *testing.T) {
	syncs := []struct {
		in   string
		want SyncMode
		ok   bool
	}{{"always", SyncAlways, true}, {"NoSync", SyncNoSync, true}, {"nometasync", SyncNoMetaSync, true}, {"bogus", 0, false}}
	for _, tc := range syncs {
		got, err := ParseSyncMode(tc.in)
		if !tc.ok {
			require.Error(t, err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
		assert.Equal(t, strings.ToLower(tc.in), got.String())
	}
	commits := []struct {
		in   string
		want CommitMode
		ok   bool
	}{{"immediate", CommitImmediate, true}, {"group", CommitGroup, true}, {"later", 0, false}}
	for _, tc := range commits {
		got, err := ParseCommitMode(tc.in)
		if !tc.ok {
			require.Error(t, err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
		assert.Equal(t, tc.in, got.String())
	}
	_, err := Open(testCtx(t), t.TempDir(), WithConcurrency(0))
	require.Error(t, err)
}
