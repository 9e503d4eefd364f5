package lmdb

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rssBytes reads the resident set size from /proc/self/statm.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	require.GreaterOrEqual(t, len(f), 2)
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

// TestNoCLeak opens and closes an environment, and runs write, read and
// cursor transactions, 10,000 times each; C-side leaks (environments,
// transaction handles, cursors, C strings) would show as RSS growth that
// Go's GC cannot reclaim.
func TestNoCLeak(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const iterations = 10000
	cycle := func(i int) {
		env, err := Open(dir, WithFlags(NoSync), WithMapSize(1<<20), WithMaxReaders(4))
		require.NoError(t, err)
		var dbi DBI
		require.NoError(t, env.Update(ctx, func(txn *Txn) error {
			dbi, err = txn.OpenDBI("leak", Create)
			if err != nil {
				return err
			}
			return txn.Put(dbi, []byte("k"), fmt.Appendf(nil, "v%d", i), 0)
		}))
		require.NoError(t, env.View(ctx, func(txn *Txn) error {
			if _, err := txn.Get(dbi, []byte("k")); err != nil {
				return err
			}
			cur, err := txn.OpenCursor(dbi)
			if err != nil {
				return err
			}
			_, _, err = cur.Get(nil, First)
			return err
		}))
		require.NoError(t, env.Close())
	}
	// Warm-up lets the Go heap and malloc arenas reach steady state.
	for i := 0; i < 2000; i++ {
		cycle(i)
	}
	settle()
	before := rssBytes(t)
	for i := 0; i < iterations; i++ {
		cycle(i)
	}
	settle()
	after := rssBytes(t)
	t.Logf("env cycles: RSS before %d KiB, after %d KiB", before>>10, after>>10)
	limit := int64(8 << 20)
	if instrumentedBuild {
		limit = 64 << 20
	}
	require.Less(t, after-before, limit, "RSS grew by %d KiB over %d env cycles", (after-before)>>10, iterations)

	env, err := Open(dir, WithFlags(NoSync), WithMapSize(1<<20))
	require.NoError(t, err)
	defer env.Close()
	txns := func() {
		for i := 0; i < iterations; i++ {
			require.NoError(t, env.View(ctx, func(txn *Txn) error {
				d, err := txn.OpenDBI("leak", 0)
				if err != nil {
					return err
				}
				cur, err := txn.OpenCursor(d)
				if err != nil {
					return err
				}
				defer cur.Close()
				_, _, err = cur.Get([]byte("k"), SetRange)
				return err
			}))
			require.NoError(t, env.Update(ctx, func(txn *Txn) error {
				d, err := txn.OpenDBI("leak", 0)
				if err != nil {
					return err
				}
				return txn.Put(d, []byte("k"), []byte("v"), 0)
			}))
		}
	}
	txns()
	settle()
	before = rssBytes(t)
	txns()
	settle()
	after = rssBytes(t)
	t.Logf("txn cycles: RSS before %d KiB, after %d KiB", before>>10, after>>10)
	require.Less(t, after-before, limit/2, "RSS grew by %d KiB over %d txn cycles", (after-before)>>10, iterations)
}
