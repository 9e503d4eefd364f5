package lanes_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// The attacker child: a client of the server at envAttackAddr that looks
// for envAttackMarker in every shared segment it can reach.
const (
	envAttackAddr   = "HATRPC_LANES_ATTACK_ADDR"
	envAttackMarker = "HATRPC_LANES_ATTACK_MARKER"
)

// scan is what the attacker reports.
type scan struct {
	victim   bool // the victim's marker was found somewhere
	ownPeer  bool // the attacker's own payload was found in a segment the server gave it
	segs     int  // shared-memory mappings scanned
	peerSegs int  // of them, not its own (mapped from the server)
	bytes    int64
}

// runAttacker is the child's whole life: connect as an ordinary shm
// client, make calls on a lane and through FLOCK so every segment the
// server hands a client is mapped, then read everything reachable: each
// shared mapping of the process (its own segments and the server's, as
// /proc/self/maps lists them), every memfd in /proc/self/fd, and /dev/shm.
func runAttacker() int {
	victim := []byte(os.Getenv(envAttackMarker))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	own := []byte("attacker-" + hex.EncodeToString(raw[:]))
	c, err := client.Dial(ctx, os.Getenv(envAttackAddr), client.WithRDMA(fastProvider))
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	defer c.Close()
	if _, err := mix.NewMixClient(c).Ping(ctx, bytes.Repeat(own, 100)); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	if _, err := mix.NewSharedClient(c).Get(ctx, own); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	var s scan
	if err := scanAll(&s, victim, own); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Printf("RESULT victim=%t ownPeer=%t segs=%d peerSegs=%d bytes=%d\n", s.victim, s.ownPeer, s.segs, s.peerSegs, s.bytes)
	return 0
}

func scanAll(s *scan, victim, own []byte) error {
	ownInodes := map[uint64]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join("/proc/self/fd", e.Name())
		if target, err := os.Readlink(p); err != nil || !strings.HasPrefix(target, "/memfd:") {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue // closed meanwhile
		}
		if st, err := f.Stat(); err == nil {
			ownInodes[st.Sys().(*syscall.Stat_t).Ino] = true
		}
		found, n := fileContains(f, victim)
		f.Close()
		s.victim = s.victim || found
		s.bytes += n
	}
	if err := scanMappings(s, ownInodes, victim, own); err != nil {
		return err
	}
	shm, _ := os.ReadDir("/dev/shm")
	for _, e := range shm {
		f, err := os.Open(filepath.Join("/dev/shm", e.Name()))
		if err != nil {
			continue
		}
		found, n := fileContains(f, victim)
		f.Close()
		s.victim = s.victim || found
		s.bytes += n
	}
	return nil
}

// scanMappings reads the pages of every shared-memory mapping that hold
// data (mincore: resident in the file; reading a hole of a shared memfd
// would allocate it) through /proc/self/mem.
func scanMappings(s *scan, ownInodes map[uint64]bool, victim, own []byte) error {
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	defer maps.Close()
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return err
	}
	defer mem.Close()
	ps := uint64(os.Getpagesize())
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/memfd:") && !strings.HasPrefix(f[5], "/dev/shm/") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		ino, err3 := strconv.ParseUint(f[4], 10, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("bad maps line %q", sc.Text())
		}
		s.segs++
		peer := !ownInodes[ino]
		if peer {
			s.peerSegs++
		}
		vec := make([]byte, (end-start)/ps)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(start), uintptr(end-start), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			continue // unmapped meanwhile
		}
		buf := make([]byte, 0, 1<<20)
		flush := func(at uint64) {
			if len(buf) == 0 {
				return
			}
			s.bytes += int64(len(buf))
			s.victim = s.victim || bytes.Contains(buf, victim)
			s.ownPeer = s.ownPeer || peer && bytes.Contains(buf, own)
			// keep the tail so a marker across the chunk edge is seen
			keep := min(len(buf), len(victim)+len(own))
			copy(buf, buf[len(buf)-keep:])
			buf = buf[:keep]
			_ = at
		}
		for i, v := range vec {
			if v&1 == 0 {
				flush(0)
				buf = buf[:0]
				continue
			}
			page := make([]byte, ps)
			if _, err := mem.ReadAt(page, int64(start+uint64(i)*ps)); err != nil {
				break
			}
			buf = append(buf, page...)
			if len(buf) >= 1<<20 {
				flush(0)
			}
		}
		flush(0)
	}
	return sc.Err()
}

// fileContains reads the data (not the holes) of f.
func fileContains(f *os.File, marker []byte) (bool, int64) {
	st, err := f.Stat()
	if err != nil {
		return false, 0
	}
	fd := int(f.Fd())
	var n int64
	buf := make([]byte, 1<<20)
	for off := int64(0); off < st.Size(); {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			break
		}
		for p := data; p < hole; p += int64(len(buf) - len(marker)) {
			k, _ := f.ReadAt(buf[:min(int64(len(buf)), hole-p)], p)
			n += int64(k)
			if bytes.Contains(buf[:k], marker) {
				return true, n
			}
			if p+int64(k) >= hole || k == 0 {
				break
			}
		}
		off = hole
	}
	return false, n
}

// attack runs the attacker as a separate process of the same uid and
// returns what it found.
func attack(t *testing.T, addr string, victim []byte) scan {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envAttackAddr+"="+addr, envAttackMarker+"="+string(victim))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "attacker: %s %s", out, stderr.String())
	var s scan
	line := strings.TrimSpace(string(out))
	_, err = fmt.Sscanf(line[strings.LastIndex(line, "RESULT"):], "RESULT victim=%t ownPeer=%t segs=%d peerSegs=%d bytes=%d",
		&s.victim, &s.ownPeer, &s.segs, &s.peerSegs, &s.bytes)
	require.NoError(t, err, "attacker said %q", line)
	t.Logf("attacker: %s", line[strings.LastIndex(line, "RESULT"):])
	return s
}

// TestOtherClientFindsNothing: a client cannot read another client's
// payload. The victim (in this process, beside the server) sends a marker
// on a lane and through FLOCK and stays connected; a separate process of
// the same uid connects as an ordinary client and reads every shared
// segment it can reach — all it was given, its /proc/self/fd, /dev/shm.
// It finds its own payload in the server's segments (so the scan does see
// the server's memory), never the victim's: each connection's lanes and
// FLOCK peer live in a PD of their own, and on shm each PD in a segment of
// its own that only that connection's peer maps. Again after the victim
// has gone.
func TestOtherClientFindsNothing(t *testing.T) {
	srv, addr := mixServer(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	var raw [16]byte
	_, err := rand.Read(raw[:])
	require.NoError(t, err)
	marker := []byte("victim-" + hex.EncodeToString(raw[:]))

	c, err := client.Dial(ctx, addr, client.WithRDMA(fastProvider))
	require.NoError(t, err)
	got, err := mix.NewMixClient(c).Ping(ctx, bytes.Repeat(marker, 100))
	require.NoError(t, err)
	require.True(t, bytes.Contains(got, marker))
	got, err = mix.NewSharedClient(c).Get(ctx, marker)
	require.NoError(t, err)
	require.True(t, bytes.Contains(got, marker))
	var onLanes int
	for _, st := range c.LaneStats() {
		onLanes += st.Lanes
	}
	require.Positive(t, onLanes, "the victim's call did not go by a lane")

	provider, _ := insisted(t)
	check := func(when string) {
		s := attack(t, addr, marker)
		assert.False(t, s.victim, "%s: the attacker read the victim's payload", when)
		if provider == rdma.ProviderSHM {
			assert.Positive(t, s.peerSegs, "%s: the attacker mapped none of the server's segments", when)
			assert.True(t, s.ownPeer, "%s: the scan does not see payloads in the server's segments", when)
		} else {
			assert.Zero(t, s.segs, "%s: shared segments on %s", when, provider)
		}
	}
	check("victim live")
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool {
		return serverMetric(t, srv, "hatrpc_server_flock_peers") == 0 && serverMetric(t, srv, "hatrpc_server_lanes") == 0
	}, testenv.HangGuard(time.Minute), 5*time.Millisecond)
	check("victim gone")
}
