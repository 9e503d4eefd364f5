package emul

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// versioned is a record whose every field carries the same version, so a
// reader can tell a whole record from a mix of two writes.
func versioned(key string, v, size int) map[string][]byte {
	r := map[string][]byte{}
	for i := range 8 {
		r[fmt.Sprintf("f%d", i)] = bytes.Repeat([]byte(fmt.Sprintf("%s#%08d;", key, v)), size)
	}
	return r
}

func versionOf(t *testing.T, key string, r map[string][]byte) int {
	t.Helper()
	v := -1
	for f, b := range r {
		var got int
		_, err := fmt.Sscanf(string(b), key+"#%08d;", &got)
		require.NoError(t, err, "field %s", f)
		require.Equal(t, versioned(key, got, len(b)/len(key+"#00000000;"))["f0"], b, "torn field %s", f)
		if v >= 0 {
			require.Equal(t, v, got, "fields of two versions")
		}
		v = got
	}
	require.Len(t, r, 8)
	return v
}

// TestPilafConcurrentGetsNeverTorn runs one-sided GETs while writers keep
// rewriting the same few keys (values of different sizes, so extents are
// freed and reused under the readers): every GET returns one whole
// version, never older than one it already saw.
func TestPilafConcurrentGetsNeverTorn(t *testing.T) {
	e := newEnv(t)
	const keys, readers, writers = 4, 3, 2
	ctx := testCtx(t, testTimeout)
	w0 := e.dial(t, Pilaf)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("hot%02d", i)
		require.NoError(t, w0.Insert(ctx, names[i], versioned(names[i], 0, 4)))
	}
	var version atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	var wmu sync.Mutex
	for w := range writers {
		c := e.dial(t, Pilaf, WithPolling(rdma.PollEvent))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := int(version.Add(1))
				// One writer per key: commit order is version order.
				k := names[(i*writers+w)%keys]
				if err := c.Update(ctx, k, versioned(k, v, 1+v%40)); err != nil {
					wmu.Lock()
					werr = err
					wmu.Unlock()
					return
				}
			}
		}()
	}
	var total PilafStats
	var tmu sync.Mutex
	// Readers stop after a number of GETs, not after a time, so the test
	// means the same on a loaded host and under emulation (test/rxe).
	const wantGets = 400
	var gets atomic.Int64
	var rwg sync.WaitGroup
	for range readers {
		c := e.dial(t, Pilaf)
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			last := make([]int, keys)
			for gets.Load() < wantGets && ctx.Err() == nil {
				for i, k := range names {
					r, err := c.Read(ctx, k, nil)
					require.NoError(t, err)
					v := versionOf(t, k, r)
					require.GreaterOrEqual(t, v, last[i], "went back in time")
					last[i] = v
					gets.Add(1)
				}
			}
			tmu.Lock()
			st := c.PilafStats()
			total.Gets += st.Gets
			total.Reads += st.Reads
			total.Retries += st.Retries
			total.Fallbacks += st.Fallbacks
			tmu.Unlock()
		}()
	}
	rwg.Wait()
	close(stop)
	wg.Wait()
	require.NoError(t, werr)
	t.Logf("%d writes; readers: %+v", version.Load(), total)
	require.GreaterOrEqual(t, total.Gets, uint64(wantGets))
	// Most GETs are one-sided; the rest retried or fell back, none torn.
	require.Less(t, total.Fallbacks, total.Gets/2)
	st := e.srv.IndexStats()
	require.Equal(t, keys, st.Keys)
	require.Zero(t, st.Unindexed+st.BucketFull+st.ValueAreaFull)
}

// TestPilafIndexLimits: keys the index cannot hold (too long, too large a
// value, index full) are still read correctly, by RPC.
func TestPilafIndexLimits(t *testing.T) {
	e := newEnv(t, WithIndexCapacity(4))
	c := e.dial(t, Pilaf)
	ctx := testCtx(t, testTimeout)
	long := string(bytes.Repeat([]byte("k"), entryKeyMax+1))
	big := map[string][]byte{"f": bytes.Repeat([]byte("v"), maxExtent+1)}
	recs := map[string]map[string][]byte{long: {"f": []byte("x")}, "big": big}
	for i := range 8 {
		recs[fmt.Sprintf("k%d", i)] = map[string][]byte{"f": []byte(fmt.Sprint(i))}
	}
	for k, r := range recs {
		require.NoError(t, c.Insert(ctx, k, r))
	}
	for k, r := range recs {
		got, err := c.Read(ctx, k, nil)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	st := c.PilafStats()
	require.Equal(t, uint64(len(recs)-4), st.Fallbacks, "%+v", st)
	require.LessOrEqual(t, e.srv.IndexStats().Keys, 4)
}

// TestPilafIndexFilledFromStore: a server started on a store that already
// holds records indexes them, so GETs are one-sided from the start.
func TestPilafIndexFilledFromStore(t *testing.T) {
	dev, store := openDevice(t), openStore(t)
	ctx := testCtx(t, testTimeout)
	for i := range 2500 {
		require.NoError(t, store.Put(ctx, fmt.Sprintf("pre%05d", i), map[string][]byte{"f": []byte(fmt.Sprint(i))}))
	}
	srv, err := NewServer(ctx, dev, store)
	require.NoError(t, err)
	e := &env{dev: dev, store: store, srv: srv, errs: make(chan error, 4)}
	defer func() {
		require.NoError(t, srv.Close())
		for range e.live {
			require.NoError(t, <-e.errs)
		}
	}()
	require.Equal(t, 2500, srv.IndexStats().Keys)
	nc, _ := e.conn(ctx)
	c, err := Dial(ctx, dev, nc, Pilaf)
	require.NoError(t, err)
	defer c.Close()
	got, err := c.Read(ctx, "pre02499", nil)
	require.NoError(t, err)
	require.Equal(t, []byte("2499"), got["f"])
	require.Equal(t, PilafStats{Gets: 1, Reads: 3}, c.PilafStats())
}

// TestServerCloseWithClients: closing the server with clients attached
// (idle and busy, every emulation) returns promptly, and the clients'
// calls then fail with ErrPeerGone instead of hanging.
func TestServerCloseWithClients(t *testing.T) {
	for _, poll := range pollings {
		t.Run(poll.String(), func(t *testing.T) {
			e := newEnv(t)
			ctx := testCtx(t, testTimeout)
			var idle, busy []*Client
			for _, k := range Kinds() {
				idle = append(idle, e.dial(t, k, WithPolling(poll)))
				busy = append(busy, e.dial(t, k, WithPolling(poll)))
			}
			require.NoError(t, idle[0].Insert(ctx, "k", map[string][]byte{"f": []byte("v")}))
			var wg sync.WaitGroup
			errs := make(chan error, len(busy))
			for _, c := range busy {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						if _, err := c.Read(ctx, "k", nil); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			time.Sleep(50 * time.Millisecond)
			closed := make(chan error, 1)
			go func() { closed <- e.srv.Close() }()
			select {
			case err := <-closed:
				require.NoError(t, err)
			case <-time.After(testenv.HangGuard(10 * time.Second)):
				t.Fatal("server Close hung with clients attached")
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				// A call in flight fails either way: cut off (ErrPeerGone)
				// or answered with the store's cancellation (ErrRemote).
				require.True(t, errors.Is(err, ErrPeerGone) || errors.Is(err, ErrRemote), "busy client: %v", err)
			}
			for _, c := range busy {
				_, err := c.Read(ctx, "k", nil)
				require.ErrorIs(t, err, ErrPeerGone)
			}
			for _, c := range idle {
				// The EOF may still be on its way to the client's watcher.
				require.Eventually(t, func() bool {
					_, err := c.Read(ctx, "k", nil)
					return errors.Is(err, ErrPeerGone)
				}, testenv.HangGuard(5*time.Second), time.Millisecond, "idle %v client", c.Kind())
			}
			a, b := net.Pipe()
			defer a.Close()
			require.ErrorIs(t, e.srv.ServeConn(ctx, b), ErrServerClosed)
		})
	}
}

// TestPilafTornDetected: a value or entry that does not match its sum (as
// a READ racing the server's rewrite sees it) is never returned: the GET
// retries, then asks the server.
func TestPilafTornDetected(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, Pilaf, WithPilafRetries(5))
	ctx := testCtx(t, testTimeout)
	rec := map[string][]byte{"f": bytes.Repeat([]byte("x"), 300)}
	require.NoError(t, c.Insert(ctx, "key", rec))
	x := e.srv.idx
	x.mu.Lock()
	ent := x.entry(x.byKey["key"])
	off := binary.LittleEndian.Uint64(ent[8:])
	x.values.Bytes()[off+100] ^= 0xff // a torn value
	x.mu.Unlock()
	got, err := c.Read(ctx, "key", nil)
	require.NoError(t, err)
	require.Equal(t, rec, got)
	require.Equal(t, PilafStats{Gets: 1, Reads: 15, Retries: 4, Fallbacks: 1}, c.PilafStats())

	x.mu.Lock()
	x.values.Bytes()[off+100] ^= 0xff
	ent[40] ^= 0xff // a torn entry
	x.mu.Unlock()
	got, err = c.Read(ctx, "key", nil)
	require.NoError(t, err)
	require.Equal(t, rec, got)
	require.Equal(t, PilafStats{Gets: 2, Reads: 25, Retries: 8, Fallbacks: 2}, c.PilafStats())

	x.mu.Lock()
	ent[40] ^= 0xff
	x.mu.Unlock()
	_, err = c.Read(ctx, "key", nil)
	require.NoError(t, err)
	require.Equal(t, PilafStats{Gets: 3, Reads: 28, Retries: 8, Fallbacks: 2}, c.PilafStats())
}

// TestPilafRewriteStress republishes index entries as fast as the server
// can (no store in the way, extents of changing sizes freed and reused)
// while clients GET them one-sidedly: collisions are then frequent, and
// every GET still returns one whole version (a GET that gives up gets the
// store's version 0 by RPC).
func TestPilafRewriteStress(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, testTimeout)
	const keys = 2
	names := []string{"s0", "s1"}
	w := e.dial(t, Pilaf)
	for _, k := range names {
		require.NoError(t, w.Insert(ctx, k, versioned(k, 0, 4)))
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		v := 0
		for {
			select {
			case <-stop:
				done <- v
				return
			default:
			}
			v++
			k := names[v%keys]
			e.srv.idx.publish(k, kvstore.EncodeRecord(versioned(k, v, 1+v%60)))
		}
	}()
	var total PilafStats
	var mu sync.Mutex
	var wg sync.WaitGroup
	// The readers stop after a number of GETs, not after a time: under
	// emulation (test/rxe) a second holds far fewer than on a host.
	const wantGets = 400
	var gets atomic.Int64
	for range 2 {
		c := e.dial(t, Pilaf, WithPilafRetries(8))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gets.Load() < wantGets && ctx.Err() == nil {
				for _, k := range names {
					r, err := c.Read(ctx, k, nil)
					require.NoError(t, err)
					versionOf(t, k, r)
					gets.Add(1)
				}
			}
			st := c.PilafStats()
			mu.Lock()
			total.Gets, total.Reads, total.Retries, total.Fallbacks = total.Gets+st.Gets, total.Reads+st.Reads,
				total.Retries+st.Retries, total.Fallbacks+st.Fallbacks
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stop)
	t.Logf("%d republications; readers: %+v", <-done, total)
	require.GreaterOrEqual(t, total.Gets, uint64(wantGets))
}

// A GET retries at once, then pauses between retries, doubling up to
// retryPauseMax: 64 retries wait about 46 ms for a rewrite that a
// preempted server left half done, where they took 25 µs without pauses.
func TestPilafRetryPauses(t *testing.T) {
	cases := []struct {
		attempt int
		want    time.Duration
	}{
		{1, 0}, {retrySpins, 0}, {retrySpins + 1, time.Microsecond}, {retrySpins + 2, 2 * time.Microsecond},
		{retrySpins + 10, 512 * time.Microsecond}, {retrySpins + 11, time.Millisecond}, {63, time.Millisecond}, {1 << 20, time.Millisecond},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, retryPauseFor(tc.attempt), "attempt %d", tc.attempt)
	}
	var total time.Duration
	for a := 1; a < 64; a++ {
		total += retryPauseFor(a)
	}
	require.Equal(t, 46023*time.Microsecond, total)
}
