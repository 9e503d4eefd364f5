package lanes_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// sharedSegments opens this process's shared-memory segments (the shm
// provider's memfds) as a same-uid process would reach them.
func sharedSegments(t *testing.T) []*os.File {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var out []*os.File
	for _, e := range ents {
		p := filepath.Join("/proc/self/fd", e.Name())
		target, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(target, "/memfd:hatrpc-shm") {
			continue
		}
		f, err := os.Open(p)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		st, err := f.Stat()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "segment mode")
		out = append(out, f)
	}
	return out
}

// findIn reports whether marker occurs in the data (not the holes) of f.
func findIn(t *testing.T, f *os.File, marker []byte) bool {
	t.Helper()
	st, err := f.Stat()
	require.NoError(t, err)
	buf := make([]byte, 1<<20)
	fd := int(f.Fd())
	for off := int64(0); off < st.Size(); {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			return false // ENXIO: no data after off
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		require.NoError(t, err)
		// Overlap chunks by the marker's length so none is split unseen.
		for p := data; p < hole; p += int64(len(buf) - len(marker)) {
			n, _ := f.ReadAt(buf[:min(int64(len(buf)), hole-p)], p)
			if bytes.Contains(buf[:n], marker) {
				return true
			}
			if p+int64(n) >= hole {
				break
			}
		}
		off = hole
	}
	return false
}

// TestNoPayloadLeftInSharedSegment: once a client has gone, nothing it
// sent or received is left in any shared segment a same-uid process can
// map: its lanes' and its FLOCK handle's rings and buffers are freed, and
// freed segment memory is zeroed. Server and client share this process's
// segment, so both sides' leftovers are looked for. (On ibv there is no
// shared segment; the test checks the shm provider's.)
func TestNoPayloadLeftInSharedSegment(t *testing.T) {
	srv, addr := mixServer(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	var raw [16]byte
	_, err := rand.Read(raw[:])
	require.NoError(t, err)
	marker := []byte("secret-" + hex.EncodeToString(raw[:]))

	c, err := client.Dial(ctx, addr, client.WithRDMA(fastProvider))
	require.NoError(t, err)
	got, err := mix.NewMixClient(c).Ping(ctx, bytes.Repeat(marker, 100)) // a lane
	require.NoError(t, err)
	require.True(t, bytes.Contains(got, marker))
	got, err = mix.NewSharedClient(c).Get(ctx, marker) // FLOCK
	require.NoError(t, err)
	require.True(t, bytes.Contains(got, marker))
	segs := sharedSegments(t)
	provider, _ := insisted(t)
	if provider == rdma.ProviderSHM {
		require.NotEmpty(t, segs, "no shm segment found")
		found := false
		for _, f := range segs {
			found = found || findIn(t, f, marker)
		}
		require.True(t, found, "the scan does not see a live client's payload")
	}
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool {
		return serverMetric(t, srv, "hatrpc_server_flock_peers") == 0 && serverMetric(t, srv, "hatrpc_server_lanes") == 0
	}, testenv.HangGuard(20*time.Second), 5*time.Millisecond)
	for _, f := range segs {
		assert.False(t, findIn(t, f, marker), "a departed client's payload is still in %s", f.Name())
	}
}
