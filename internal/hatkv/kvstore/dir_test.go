package kvstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// snapshot returns every file of dir with its content, to assert that a
// refused open changed nothing.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// newStoreDir creates a closed store with n YCSB records.
func newStoreDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(testCtx(t), dir, WithSync(SyncNoSync), WithMapSize(64<<20))
	require.NoError(t, err)
	fill(t, s, 0, n)
	require.NoError(t, s.Close())
	return dir
}

func fill(t *testing.T, s *Store, from, to int) {
	t.Helper()
	for i := from; i < to; i += 500 {
		var kvs []KV
		for j := i; j < min(i+500, to); j++ {
			k := fmt.Sprintf("user%06d", j)
			kvs = append(kvs, KV{Key: k, Record: ycsbRecord(k, 10, 100)})
		}
		require.NoError(t, s.MultiPut(testCtx(t), kvs))
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}

func TestDataDirectoryRules(t *testing.T) {
	marker := string(markerContent())
	tests := []struct {
		name   string
		setup  func(t *testing.T) string
		want   []error // nil: opens
		detail string
	}{
		{name: "missing directory is created", setup: func(t *testing.T) string { return filepath.Join(t.TempDir(), "a", "b") }},
		{name: "empty directory", setup: func(t *testing.T) string { return t.TempDir() }},
		{name: "marked store", setup: func(t *testing.T) string { return newStoreDir(t, 10) }},
		{name: "store from before the marker is adopted", setup: func(t *testing.T) string {
			dir := newStoreDir(t, 10)
			require.NoError(t, os.Remove(filepath.Join(dir, MarkerFile)))
			return dir
		}},
		{name: "crash while writing the marker", setup: func(t *testing.T) string {
			dir := newStoreDir(t, 10)
			require.NoError(t, os.Rename(filepath.Join(dir, MarkerFile), filepath.Join(dir, MarkerFile+".tmp")))
			return dir
		}},
		{name: "foreign directory", setup: func(t *testing.T) string {
			dir := t.TempDir()
			write(t, dir, "notes.txt", "my notes\n")
			write(t, dir, "go.mod", "module x\n")
			return dir
		}, want: []error{ErrForeignData}, detail: "(directory holds go.mod, notes.txt and no hatkv-format: hatkv uses an empty directory or one it created)"},
		{name: "foreign files beside LMDB's", setup: func(t *testing.T) string {
			dir := newStoreDir(t, 10)
			require.NoError(t, os.Remove(filepath.Join(dir, MarkerFile)))
			write(t, dir, "notes.txt", "my notes\n")
			return dir
		}, want: []error{ErrForeignData}, detail: "directory holds notes.txt and no hatkv-format"},
		{name: "text lock.mdb alone", setup: func(t *testing.T) string {
			dir := t.TempDir()
			write(t, dir, "lock.mdb", "my notes\n")
			return dir
		}, want: []error{ErrForeignData}, detail: "directory holds lock.mdb and no hatkv-format"},
		{name: "text lock.mdb in a store", setup: func(t *testing.T) string {
			dir := newStoreDir(t, 10)
			write(t, dir, "lock.mdb", "my notes\n")
			return dir
		}, want: []error{ErrForeignData, lmdb.ErrDamaged}, detail: "(lock.mdb is not LMDB's lock file): "},
		{name: "empty data.mdb", setup: func(t *testing.T) string {
			dir := t.TempDir()
			write(t, dir, "data.mdb", "")
			return dir
		}, want: []error{ErrCorruptData, lmdb.ErrDamaged}, detail: "data.mdb: file is empty (0 bytes)"},
		{name: "empty data.mdb in a marked directory", setup: func(t *testing.T) string {
			dir := t.TempDir()
			write(t, dir, "data.mdb", "")
			write(t, dir, MarkerFile, marker)
			return dir
		}, want: []error{ErrCorruptData}, detail: "data.mdb: file is empty (0 bytes)"},
		{name: "marker without data.mdb", setup: func(t *testing.T) string {
			dir := t.TempDir()
			write(t, dir, MarkerFile, marker)
			return dir
		}, want: []error{ErrCorruptData}, detail: "(data.mdb is missing although hatkv-format says this is a hatkv directory"},
		{name: "newer marker", setup: func(t *testing.T) string {
			dir := newStoreDir(t, 1)
			write(t, dir, MarkerFile, fmt.Sprintf("hatkv data directory\nformat %d\n", FormatVersion+1))
			return dir
		}, want: []error{ErrUnsupportedVersion}, detail: fmt.Sprintf("(hatkv-format says format %d, this build reads formats 1..%d: ", FormatVersion+1, FormatVersion)},
		{name: "foreign marker", setup: func(t *testing.T) string {
			dir := t.TempDir()
			write(t, dir, MarkerFile, "something else\n")
			return dir
		}, want: []error{ErrForeignData}, detail: "(hatkv-format is not hatkv's marker file)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t)
			var before map[string]string
			if tc.want != nil {
				before = snapshot(t, dir)
			}
			s, err := Open(testCtx(t), dir, WithSync(SyncNoSync), WithMapSize(64<<20))
			if tc.want == nil {
				require.NoError(t, err)
				require.NoError(t, s.Close())
				b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
				require.NoError(t, err)
				assert.Equal(t, fmt.Sprintf("hatkv data directory\nformat %d\n", FormatVersion), string(b))
				assert.NoFileExists(t, filepath.Join(dir, MarkerFile+".tmp"))
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			assert.Contains(t, err.Error(), "kvstore: open "+dir+": ")
			assert.Contains(t, err.Error(), tc.detail)
			assert.Equal(t, before, snapshot(t, dir), "a refused directory is left as it was")
		})
	}
}

// damage writes 3 pages of random bytes at page pg, or truncates the
// file to half when pg is 0.
func damage(t *testing.T, dir string, pg int) {
	t.Helper()
	p := filepath.Join(dir, dataFile)
	if pg == 0 {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(p, fi.Size()/2))
		return
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 3*os.Getpagesize())
	rng := rand.New(rand.NewPCG(uint64(pg), 7))
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	_, err = f.WriteAt(b, int64(pg*os.Getpagesize()))
	require.NoError(t, err)
}

// TestDamagedStore is issue 18's damage (in LMDB: SIGBUS at the first Get,
// an assertion in mdb_cursor_next, SIGSEGV, records silently lost): each
// is refused at Open, with the file untouched, and listed by Check.
func TestDamagedStore(t *testing.T) {
	const records = 3000
	base := newStoreDir(t, records)
	tests := []struct {
		name    string
		page    int // 0: truncate to half
		open    []string
		checked string
	}{
		{name: "truncated to half", open: []string{"data.mdb: file is truncated: the meta page (txn ", "but the file has"}},
		{name: "garbage at page 50", page: 50, open: []string{"problem(s) in data.mdb, e.g. tree hatkv.data: page 5"}, checked: "page 50: page header says page"},
		{name: "garbage at page 120", page: 120, open: []string{"problem(s) in data.mdb, e.g. tree hatkv.data: page 12"}, checked: "page 120: page header says page"},
		{name: "garbage at page 200", page: 200, open: []string{"problem(s) in data.mdb, e.g. tree hatkv.data: page 20"}, checked: "page 200: page header says page"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range snapshot(t, base) {
				write(t, dir, name, content)
			}
			damage(t, dir, tc.page)
			before := snapshot(t, dir)
			s, err := Open(testCtx(t), dir)
			if s != nil {
				_ = s.Close()
			}
			require.ErrorIs(t, err, ErrCorruptData)
			for _, w := range tc.open {
				assert.Contains(t, err.Error(), w)
			}
			assert.Equal(t, before, snapshot(t, dir))

			rep, err := Check(testCtx(t), dir)
			if tc.checked == "" {
				require.ErrorIs(t, err, ErrCorruptData)
				require.ErrorIs(t, err, lmdb.ErrCorrupted)
				return
			}
			require.NoError(t, err)
			require.False(t, rep.OK())
			var all []string
			for _, p := range rep.Problems {
				all = append(all, p.String())
			}
			assert.Contains(t, strings.Join(all, "\n"), tc.checked)
			assert.Contains(t, strings.Join(all, "\n"), fmt.Sprintf("tree hatkv.data: root record says %d entries, the walk found", records))
		})
	}
}

func TestCheckIntactAndBadRecord(t *testing.T) {
	dir := newStoreDir(t, 100)
	rep, err := Check(testCtx(t), dir)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)

	// A value that is valid LMDB but not a hatkv record: LMDB would serve
	// it, Get would fail on it; open refuses it and check names the key.
	s, err := Open(testCtx(t), dir)
	require.NoError(t, err)
	require.NoError(t, s.env.Update(testCtx(t), func(txn *lmdb.Txn) error {
		return txn.Put(s.data, []byte("user000042"), []byte{9, 9, 9}, 0)
	}))
	require.NoError(t, s.Close())
	rep, err = Check(testCtx(t), dir)
	require.NoError(t, err)
	require.Len(t, rep.Problems, 1)
	assert.Contains(t, rep.Problems[0].String(), `tree hatkv.data: page `)
	assert.Contains(t, rep.Problems[0].String(), `record "user000042": kvstore: corrupt record: unknown version byte`)
	_, err = Open(testCtx(t), dir)
	require.ErrorIs(t, err, ErrCorruptData)
	assert.Contains(t, err.Error(), `record "user000042"`)
	s, err = Open(testCtx(t), dir, WithVerify(VerifyMeta))
	require.NoError(t, err, "the meta-only check does not read records")
	require.NoError(t, s.Close())

	_, err = Check(testCtx(t), t.TempDir())
	require.ErrorIs(t, err, ErrForeignData)
}

func TestBackupWhileWriting(t *testing.T) {
	dir := newStoreDir(t, 2000)
	s, err := Open(testCtx(t), dir, WithSync(SyncNoSync), WithCommit(CommitGroup))
	require.NoError(t, err)
	defer s.Close()

	// Writers keep going during the copy; the copy is one snapshot.
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 2000; !stop.Load(); i++ {
			k := fmt.Sprintf("user%06d", i)
			if err := s.Put(testCtx(t), k, ycsbRecord(k, 10, 100)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	target := filepath.Join(t.TempDir(), "backup")
	rep, err := s.Backup(testCtx(t), target)
	stop.Store(true)
	wg.Wait()
	require.NoError(t, err)
	require.True(t, rep.OK())
	var entries uint64
	for _, tr := range rep.Trees {
		if tr.Name == dataDBName {
			entries = tr.Entries
		}
	}
	require.GreaterOrEqual(t, entries, uint64(2000))
	names := []string{}
	des, err := os.ReadDir(target)
	require.NoError(t, err)
	for _, d := range des {
		names = append(names, d.Name())
	}
	sort.Strings(names)
	assert.Equal(t, []string{"data.mdb", MarkerFile}, names)

	b, err := Open(testCtx(t), target)
	require.NoError(t, err, "a backup is a data directory")
	st, err := b.Stats(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, entries, st.Records)
	rec, err := b.Get(testCtx(t), "user001999")
	require.NoError(t, err)
	assert.Equal(t, ycsbRecord("user001999", 10, 100), rec)
	require.NoError(t, b.Close())

	// A non-empty target is refused and left alone.
	full := t.TempDir()
	write(t, full, "keep.txt", "mine")
	_, err = s.Backup(testCtx(t), full)
	require.ErrorIs(t, err, ErrBackupTarget)
	assert.Equal(t, map[string]string{"keep.txt": "mine"}, snapshot(t, full))
}
