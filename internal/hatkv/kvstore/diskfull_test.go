package kvstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireMountEnv makes TestDiskFull fail, rather than pass with nothing
// checked, when the test process cannot mount a small file system (it
// needs root).
const requireMountEnv = "HATRPC_REQUIRE_MOUNT"

// smallDisk mounts a tmpfs of size bytes on a fresh directory for the
// test, or returns "" when this process may not mount.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size))
	if err != nil {
		if os.Getenv(requireMountEnv) != "" {
			t.Fatalf("%s is set, but mounting a tmpfs failed: %v", requireMountEnv, err)
		}
		t.Logf("cannot mount a small file system (%v; it needs root): set %s to make this a failure", err, requireMountEnv)
		return ""
	}
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(dir, 0)) })
	return dir
}

// fillDisk writes a file into dir until the file system is full.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			return
		}
	}
}

// TestDiskFull: a store whose disk fills up refuses writes with
// ErrDiskFull (an ErrStoreFull), keeps every record it had and serves
// reads, and writes again once space is freed; with writemap, where a
// write the disk cannot back would be a SIGBUS that ends the process, the
// map is allocated on disk at Open (which says so when it does not fit).
func TestDiskFull(t *testing.T) {
	const disk = 3 << 20
	t.Run("no writemap", func(t *testing.T) {
		dir := smallDisk(t, disk)
		if dir == "" {
			return
		}
		ballast := filepath.Join(dir, "ballast")
		require.NoError(t, os.WriteFile(ballast, make([]byte, 512<<10), 0o600))
		ctx := testCtx(t)
		var logged bytes.Buffer
		s, err := Open(ctx, filepath.Join(dir, "db"), WithMapSize(64<<20), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		n, err := insertUntilFull(ctx, s)
		require.ErrorIs(t, err, ErrDiskFull)
		require.ErrorIs(t, err, ErrStoreFull)
		assert.Contains(t, err.Error(), "bytes free on the file system holding "+filepath.Join(dir, "db"))
		require.Greater(t, n, 100)
		for i := 0; i < n; i += n / 10 {
			got, err := s.Get(ctx, fmt.Sprintf("key%06d", i))
			require.NoError(t, err, "record %d is still there", i)
			assert.Len(t, got, 10)
		}
		st, err := s.Stats(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, n, st.Records)
		for i := 0; i < 3; i++ {
			require.ErrorIs(t, s.Insert(ctx, fmt.Sprintf("more%d", i), ycsbRecord("k", 10, 100)), ErrDiskFull)
		}
		// Said once, however many writes fail, and once when they work again.
		assert.Equal(t, 1, strings.Count(logged.String(), "level=ERROR msg=\"kvstore: disk full: writes are refused until space is freed; reads go on\""), logged.String())
		require.NoError(t, os.Remove(ballast))
		require.NoError(t, s.Insert(ctx, "after", ycsbRecord("k", 10, 100)), "writes work again once space is freed")
		require.NoError(t, s.Insert(ctx, "after2", ycsbRecord("k", 10, 100)))
		assert.Equal(t, 1, strings.Count(logged.String(), "level=INFO msg=\"kvstore: writes succeed again after the disk was full\""), logged.String())
		assert.Equal(t, 2, strings.Count(logged.String(), "\n"), logged.String())
		require.NoError(t, s.Delete(ctx, "key000000"))
	})
	t.Run("writemap, map larger than the disk", func(t *testing.T) {
		dir := smallDisk(t, disk)
		if dir == "" {
			return
		}
		_, err := Open(testCtx(t), filepath.Join(dir, "db"), WithWriteMap(true), WithMapSize(64<<20))
		var oe *OpenError
		require.ErrorAs(t, err, &oe)
		require.ErrorIs(t, err, syscall.ENOSPC)
		assert.Contains(t, err.Error(), "reserving the map (67108864 bytes) on disk for MDB_WRITEMAP")
		assert.Contains(t, err.Error(), "writemap keeps the whole map allocated on disk")
	})
	t.Run("writemap, the disk fills after Open", func(t *testing.T) {
		dir := smallDisk(t, disk)
		if dir == "" {
			return
		}
		ctx := testCtx(t)
		s, err := Open(ctx, filepath.Join(dir, "db"), WithWriteMap(true), WithMapSize(2<<20))
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		fillDisk(t, dir)
		n, err := insertUntilFull(ctx, s)
		// The map, not the disk, ends the writes: its pages were the
		// file's before the filler came.
		require.ErrorIs(t, err, ErrStoreFull)
		require.False(t, errors.Is(err, ErrDiskFull), "%v", err)
		require.Greater(t, n, 100)
		got, err := s.Get(ctx, "key000000")
		require.NoError(t, err)
		assert.Len(t, got, 10)
	})
}
