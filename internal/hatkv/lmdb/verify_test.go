package lmdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	verifyRecords = 2000
	verifyBig     = 5 // values of 20 KB: overflow pages
)

// buildEnv writes a closed environment with verifyRecords records of
// ~900 bytes and verifyBig overflow values in a named database, and
// returns its data file's bytes.
func buildEnv(t testing.TB, records, big int) []byte {
	t.Helper()
	dir := t.TempDir()
	env, err := Open(dir, WithFlags(NoSync), WithMaxDBs(2))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, env.Update(ctx, func(txn *Txn) error {
		dbi, err := txn.OpenDBI("data", Create)
		if err != nil {
			return err
		}
		for i := range records {
			n := 900
			if i < big {
				n = 20 << 10
			}
			v := make([]byte, n)
			for j := range v {
				v[j] = byte(rng.UintN(256))
			}
			if err := txn.Put(dbi, fmt.Appendf(nil, "key%05d", i), v, 0); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, env.Close())
	b, err := os.ReadFile(DataFile(dir))
	require.NoError(t, err)
	return b
}

func writeTemp(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data.mdb")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// findPage returns the first page (from 2) for which match holds.
func findPage(t *testing.T, b []byte, psize int, match func(p []byte) bool) int {
	t.Helper()
	for pg := 2; (pg+1)*psize <= len(b); pg++ {
		p := b[pg*psize : (pg+1)*psize]
		if binary.LittleEndian.Uint64(p) == uint64(pg) && match(p) {
			return pg
		}
	}
	t.Fatal("no such page")
	return 0
}

func pageFlags(p []byte) uint16 { return binary.LittleEndian.Uint16(p[10:]) }

func firstKey(p []byte) []byte {
	off := int(binary.LittleEndian.Uint16(p[pageHeaderSize:]))
	ks := int(binary.LittleEndian.Uint16(p[off+6:]))
	return p[off+nodeHeaderSize : off+nodeHeaderSize+ks]
}

func TestVerifyIntact(t *testing.T) {
	path := writeTemp(t, buildEnv(t, verifyRecords, verifyBig))
	seen := 0
	rep, err := Verify(testCtx(t), path, WithRecordCheck(func(db string, key, val []byte) error {
		seen++
		if string(key) == "key00007" {
			return errors.New("rejected by the caller")
		}
		return nil
	}))
	require.NoError(t, err)
	assert.Equal(t, verifyRecords, seen, "every record is handed to the record check")
	require.Len(t, rep.Problems, 1)
	assert.Equal(t, `tree data: page `, rep.Problems[0].String()[:len("tree data: page ")])
	assert.Contains(t, rep.Problems[0].String(), `record "key00007": rejected by the caller`)
	assert.False(t, rep.Changed)
	assert.Zero(t, rep.Unaccounted, "a cleanly closed environment leaks no page")
	names := map[string]TreeReport{}
	for _, tr := range rep.Trees {
		names[tr.Name] = tr
	}
	data := names["data"]
	assert.Equal(t, uint64(verifyRecords), data.Entries)
	assert.Equal(t, data.Want.LeafPages, data.LeafPages)
	assert.Equal(t, uint64(verifyBig*6), data.OverflowPages, "20 KiB + header = 6 pages each")
	assert.Contains(t, names, MainTree)
	assert.Contains(t, names, FreeTree)

	rep, err = Verify(testCtx(t), path)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

// TestVerifyDamage is the damage of issue 18 (a truncated file, garbage
// pages at 50/120/200, which crashed or silently lost records in LMDB)
// and more: each is refused by ReadMeta or reported by Verify, never a
// crash.
func TestVerifyDamage(t *testing.T) {
	orig := buildEnv(t, verifyRecords, verifyBig)
	psize := os.Getpagesize()
	garbage := func(pg int) func([]byte) []byte {
		return func(b []byte) []byte {
			rng := rand.New(rand.NewPCG(uint64(pg), 3))
			for i := pg * psize; i < (pg+3)*psize; i++ {
				b[i] = byte(rng.UintN(256))
			}
			return b
		}
	}
	dataLeaf := func(p []byte) bool {
		// Past the overflow values, so the first entry's value is inline.
		if pageFlags(p)&pLeaf == 0 {
			return false
		}
		k := firstKey(p)
		return bytes.HasPrefix(k, []byte("key")) && string(k) > "key00010"
	}
	tests := []struct {
		name     string
		damage   func(b []byte) []byte
		wantMeta string // ReadMeta's (and Verify's) *FileError
		want     string // else: a problem Verify reports
	}{
		{name: "truncated to half", damage: func(b []byte) []byte { return b[:len(b)/2] },
			wantMeta: "file is truncated: the meta page (txn 1) references pages 0.."},
		{name: "truncated to one page", damage: func(b []byte) []byte { return b[:psize] },
			wantMeta: "too short for the second meta page"},
		{name: "empty", damage: func(b []byte) []byte { return nil }, wantMeta: "file is empty (0 bytes)"},
		{name: "not lmdb", damage: func(b []byte) []byte { return []byte(strings.Repeat("notes\n", 2000)) },
			wantMeta: "meta page 0: not a meta page"},
		{name: "bad magic", damage: func(b []byte) []byte { b[pageHeaderSize] ^= 0xff; return b },
			wantMeta: "meta page 0: bad magic"},
		{name: "newer version", damage: func(b []byte) []byte { b[psize+pageHeaderSize+4] = 2; return b },
			wantMeta: "meta page 1: data format version 2, this build of LMDB reads version 1"},
		{name: "garbage at page 50", damage: garbage(50), want: "page 50: page header says page"},
		{name: "garbage at page 120", damage: garbage(120), want: "page 120: page header says page"},
		{name: "garbage at page 200", damage: garbage(200), want: "page 200: page header says page"},
		{name: "keys out of order", damage: func(b []byte) []byte {
			p := b[findPage(t, b, psize, dataLeaf)*psize:]
			copy(p[pageHeaderSize:], []byte{p[pageHeaderSize+2], p[pageHeaderSize+3], p[pageHeaderSize], p[pageHeaderSize+1]})
			return b
		}, want: "is not after the previous key"},
		{name: "node outside the page", damage: func(b []byte) []byte {
			p := b[findPage(t, b, psize, dataLeaf)*psize:]
			binary.LittleEndian.PutUint16(p[pageHeaderSize:], uint16(psize-4))
			return b
		}, want: "entry 0 at offset"},
		{name: "value size past the page", damage: func(b []byte) []byte {
			p := b[findPage(t, b, psize, dataLeaf)*psize:]
			off := int(binary.LittleEndian.Uint16(p[pageHeaderSize:]))
			binary.LittleEndian.PutUint16(p[off+2:], 7)
			return b
		}, want: "runs past the page"},
		{name: "branch to a page beyond the file", damage: func(b []byte) []byte {
			p := b[findPage(t, b, psize, func(p []byte) bool { return pageFlags(p)&pBranch != 0 })*psize:]
			off := int(binary.LittleEndian.Uint16(p[pageHeaderSize:]))
			binary.LittleEndian.PutUint16(p[off+4:], 0x7fff) // pgno bits 32..47
			return b
		}, want: "outside pages 2.."},
		{name: "overflow page overwritten", damage: func(b []byte) []byte {
			p := b[findPage(t, b, psize, func(p []byte) bool { return pageFlags(p)&pOverflow != 0 })*psize:]
			binary.LittleEndian.PutUint16(p[10:], pLeaf)
			return b
		}, want: "overflow page of entry"},
		{name: "leaf bounds", damage: func(b []byte) []byte {
			p := b[findPage(t, b, psize, dataLeaf)*psize:]
			binary.LittleEndian.PutUint16(p[12:], uint16(psize+2))
			return b
		}, want: "bad free-space bounds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTemp(t, tc.damage(bytes.Clone(orig)))
			_, merr := ReadMeta(path)
			rep, err := Verify(testCtx(t), path)
			if tc.wantMeta != "" {
				for _, e := range []error{merr, err} {
					var fe *FileError
					require.ErrorAs(t, e, &fe)
					require.ErrorIs(t, e, ErrDamaged)
					assert.Contains(t, e.Error(), tc.wantMeta)
					assert.True(t, strings.HasPrefix(e.Error(), path+": "), e.Error())
				}
				return
			}
			require.NoError(t, merr)
			require.NoError(t, err)
			require.False(t, rep.OK())
			var all []string
			for _, p := range rep.Problems {
				all = append(all, p.String())
				assert.NotContains(t, p.Msg, "checker failure")
			}
			assert.Contains(t, strings.Join(all, "\n"), tc.want)
		})
	}
}

func TestCheckLockFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content []byte
		want    string
	}{
		{"missing", nil, ""},
		{"empty", []byte{}, ""},
		{"lmdb", binary.LittleEndian.AppendUint32(nil, lockMagic), ""},
		{"text", []byte("my notes\n"), "bad magic 0x6e20796d: not an LMDB lock file"},
		{"short", []byte("ab"), "2 bytes, too short for an LMDB lock file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if tc.content != nil {
				require.NoError(t, os.WriteFile(p, tc.content, 0o644))
			}
			err := CheckLockFile(p)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrDamaged)
			assert.Equal(t, p+": "+tc.want, err.Error())
		})
	}
}

// FuzzVerify: whatever the bytes, Verify answers with an error or a
// report, and its own bounds checks catch everything (no recovered panic).
// The seed is a whole environment (~57 KB), which the fuzzer minimizes
// slowly: run it with -fuzzminimizetime 0s (20 s: 16,409 inputs, no
// failure).
func FuzzVerify(f *testing.F) {
	f.Add(buildEnv(f, 12, 1))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "data.mdb")
		require.NoError(t, os.WriteFile(path, b, 0o644))
		rep, err := Verify(context.Background(), path)
		if err != nil {
			require.ErrorIs(t, err, ErrDamaged)
			return
		}
		for _, p := range rep.Problems {
			require.NotContains(t, p.Msg, "checker failure")
		}
	})
}
