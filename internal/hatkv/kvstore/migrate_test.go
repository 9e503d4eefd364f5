package kvstore

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// testdata/format1.tar.gz is a data directory (hatkv-format, data.mdb)
// written by the format-1 kvstore, at commit e3c5b8d (before records were
// kept in wire form): kvstore.Open + Insert of fixtureRecord(0..1499),
// the four fixtureExtras, then Delete("user0007") and Close.

// fixtureRecord is the generator's record i (keep in step with it).
func fixtureRecord(i int) (string, Record) {
	key := fmt.Sprintf("user%04d", i)
	rec := Record{}
	for f := 0; f <= i%4; f++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%d/%d", i, f)))
		rec[fmt.Sprintf("field%d", f)] = sum[:8+i%9]
	}
	return key, rec
}

func fixtureExtras() map[string]Record {
	big := make([]byte, 10000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return map[string]Record{
		"big":   {"blob": big, "name": []byte("ten thousand bytes")},
		"bin":   {"all": all},
		"empty": {"e": {}},
		"üñí":   {"ключ": []byte("значение")},
	}
}

func fixtureWant() map[string]Record {
	want := fixtureExtras()
	for i := 0; i < 1500; i++ {
		if i != 7 {
			k, r := fixtureRecord(i)
			want[k] = r
		}
	}
	return want
}

// format1Dir unpacks the format-1 fixture into a fresh directory.
func format1Dir(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "format1.tar.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	dir := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(h.Name)), b, 0o644))
	}
	return dir
}

// storedLayouts counts the stored values by their first byte.
func storedLayouts(t *testing.T, s *Store) map[byte]int {
	t.Helper()
	out := map[byte]int{}
	require.NoError(t, s.env.View(testCtx(t), func(txn *lmdb.Txn) error {
		cur, err := txn.OpenCursor(s.data)
		if err != nil {
			return err
		}
		defer cur.Close()
		for _, v, err := cur.Get(nil, lmdb.First); err == nil; _, v, err = cur.Get(nil, lmdb.Next) {
			out[v[0]]++
		}
		return nil
	}))
	return out
}

func assertFixture(t *testing.T, s *Store) {
	t.Helper()
	ctx := testCtx(t)
	want := fixtureWant()
	got, err := s.Scan(ctx, "", 2000)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for _, kv := range got {
		require.Equal(t, want[kv.Key], kv.Record, kv.Key)
		w, err := s.GetWire(ctx, kv.Key, nil, nil)
		require.NoError(t, err)
		assert.Equal(t, appendWire(nil, want[kv.Key], nil), w, "%s in wire form", kv.Key)
	}
}

// TestMigrateFormat1: a data directory written by the format-1 code is
// migrated when opened: every record reads back as written, is stored in
// the wire layout, and the identity and marker say format 2; opening it
// again migrates nothing; `hatkv check` passes before and after.
func TestMigrateFormat1(t *testing.T) {
	dir := format1Dir(t)
	ctx := testCtx(t)
	rep, err := Check(ctx, dir)
	require.NoError(t, err)
	require.Empty(t, rep.Problems, "the format-1 fixture checks clean")

	s, err := Open(ctx, dir)
	require.NoError(t, err)
	assert.Equal(t, Migration{From: 1, Records: 1503}, s.Migrated())
	assert.Equal(t, map[byte]int{recordVersion: 1503}, storedLayouts(t, s))
	assertFixture(t, s)
	require.NoError(t, s.Put(ctx, "user0001", Record{"field9": []byte("new")}))
	require.NoError(t, s.Close())
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	require.NoError(t, err)
	assert.Equal(t, "hatkv data directory\nformat 2\n", string(b))

	rep, err = Check(ctx, dir)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
	s, err = Open(ctx, dir)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, Migration{}, s.Migrated())
	r, err := s.Get(ctx, "user0001", "field9", "field1")
	require.NoError(t, err)
	_, w := fixtureRecord(1)
	assert.Equal(t, Record{"field9": []byte("new"), "field1": w["field1"]}, r)
}

// TestMigrateResumes: a migration that stops midway (a crash after the
// first step) leaves a store that opens again and finishes; nothing is
// lost or converted twice.
func TestMigrateResumes(t *testing.T) {
	dir := format1Dir(t)
	ctx := testCtx(t)
	migrateFault = func(step int) error {
		if step == 1 {
			return errors.New("power cut")
		}
		return nil
	}
	_, err := Open(ctx, dir)
	migrateFault = nil
	require.Error(t, err)
	assert.EqualError(t, err, "kvstore: open "+dir+": power cut (migrating the store from format 1 to 2 stopped after 1000 records (they are kept; opening it again resumes))")
	assert.Contains(t, readFile(t, dir, MarkerFile), "format 1", "the marker still says format 1")

	ro, err := Open(ctx, dir, WithReadOnly())
	require.NoError(t, err, "a half-migrated store reads fine")
	assert.Equal(t, map[byte]int{recordV1: 503, recordVersion: 1000}, storedLayouts(t, ro))
	assertFixture(t, ro)
	require.NoError(t, ro.Close())

	s, err := Open(ctx, dir)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, Migration{From: 1, Records: 503}, s.Migrated())
	assert.Equal(t, map[byte]int{recordVersion: 1503}, storedLayouts(t, s))
	assertFixture(t, s)
}

// TestReadOnlyFormat1: a read-only open (check, backup's second process)
// reads a format-1 store as it is and changes no file.
func TestReadOnlyFormat1(t *testing.T) {
	dir := format1Dir(t)
	before := snapshot(t, dir)
	s, err := Open(testCtx(t), dir, WithReadOnly())
	require.NoError(t, err)
	assert.Equal(t, Migration{}, s.Migrated())
	assertFixture(t, s)
	require.NoError(t, s.Close())
	after := snapshot(t, dir)
	delete(after, lockFile) // LMDB creates its lock file even read-only
	assert.Equal(t, before, after)
}

// TestRefuseNewerFormat: a store of a format this build does not know
// (by its marker, or by its identity record) is refused before anything
// is written, saying what to do.
func TestRefuseNewerFormat(t *testing.T) {
	next := FormatVersion + 1
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		detail string
	}{
		{"marker", func(t *testing.T, dir string) {
			write(t, dir, MarkerFile, fmt.Sprintf("hatkv data directory\nformat %d\n", next))
		}, fmt.Sprintf("hatkv-format says format %d, this build reads formats 1..%d: the store was written by a newer hatkv; "+
			"serve it with that version (or newer), or restore a backup made by this one", next, FormatVersion)},
		{"identity", func(t *testing.T, dir string) {
			env, err := lmdb.Open(dir, lmdb.WithMaxDBs(4))
			require.NoError(t, err)
			defer env.Close()
			require.NoError(t, env.Update(testCtx(t), func(txn *lmdb.Txn) error {
				d, err := txn.OpenDBI(metaDBName, 0)
				if err != nil {
					return err
				}
				return txn.Put(d, []byte(identityKey), append(append([]byte(nil), identityMagic...), byte(next), byte(next)), 0)
			}))
		}, fmt.Sprintf("the store's identity record says format %d, this build reads formats 1..%d: the store was written by a newer hatkv; "+
			"serve it with that version (or newer), or restore a backup made by this one", next, FormatVersion)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := newStoreDir(t, 3)
			tc.setup(t, dir)
			before := snapshot(t, dir)
			s, err := Open(testCtx(t), dir)
			if s != nil {
				_ = s.Close()
			}
			require.ErrorIs(t, err, ErrUnsupportedVersion)
			assert.Equal(t, fmt.Sprintf("kvstore: open %s: kvstore: unsupported store format version (%s)", dir, tc.detail), err.Error())
			assert.Equal(t, before, snapshot(t, dir), "nothing written")
		})
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}
