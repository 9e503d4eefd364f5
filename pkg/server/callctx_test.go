package server

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestCallCtx(t *testing.T) {
	cases := []struct {
		name    string
		timeout time.Duration
		act     func(parentCancel context.CancelFunc, c *callCtx)
		useDone bool
		want    error
	}{
		{"deadline-via-done", 20 * time.Millisecond, func(context.CancelFunc, *callCtx) {}, true, context.DeadlineExceeded},
		{"deadline-via-err", 20 * time.Millisecond, func(context.CancelFunc, *callCtx) { time.Sleep(30 * time.Millisecond) }, false, context.DeadlineExceeded},
		{"parent-cancel", 0, func(cancel context.CancelFunc, _ *callCtx) { cancel() }, true, context.Canceled},
		{"parent-cancel-err-only", 0, func(cancel context.CancelFunc, _ *callCtx) { cancel() }, false, context.Canceled},
		{"cancel-frame", time.Hour, func(_ context.CancelFunc, c *callCtx) { c.cancel(context.Canceled) }, true, context.Canceled},
		{"release", 0, func(_ context.CancelFunc, c *callCtx) { c.release() }, true, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := newCallCtx(parent, tc.timeout)
			defer c.release()
			_, hasDL := c.Deadline()
			require.Equal(t, tc.timeout > 0, hasDL)
			if tc.timeout == 0 || tc.timeout >= time.Hour {
				// Not for the 20 ms deadlines: on a loaded or emulated host
				// they may pass before this line (the hour case checks it).
				require.NoError(t, c.Err())
			}
			var done <-chan struct{}
			if tc.useDone {
				done = c.Done()
			}
			tc.act(cancel, c)
			if tc.useDone {
				select {
				case <-done:
				case <-time.After(testenv.HangGuard(5 * time.Second)):
					t.Fatal("Done not closed")
				}
			}
			require.ErrorIs(t, c.Err(), tc.want)
			// Done asked for after the end is closed already.
			select {
			case <-c.Done():
			default:
				t.Fatal("late Done not closed")
			}
			// Contexts derived by handlers follow.
			d, dcancel := context.WithCancel(c)
			defer dcancel()
			select {
			case <-d.Done():
			case <-time.After(testenv.HangGuard(5 * time.Second)):
				t.Fatal("derived context not cancelled")
			}
		})
	}
	t.Run("value-from-parent", func(t *testing.T) {
		type key struct{}
		c := newCallCtx(context.WithValue(context.Background(), key{}, 7), 0)
		defer c.release()
		require.Equal(t, 7, c.Value(key{}))
	})
}

// TestCallCtxEndRaces: Done asked for while the call ends, from another
// goroutine, still gets a closed channel and no watcher outlives release.
func TestCallCtxEndRaces(t *testing.T) {
	for i := range 300 {
		parent, cancel := context.WithCancel(context.Background())
		c := newCallCtx(parent, time.Hour)
		got := make(chan (<-chan struct{}), 1)
		go func() { got <- c.Done() }()
		switch i % 3 {
		case 0:
			c.release()
		case 1:
			cancel()
			c.release()
		case 2:
			c.cancel(context.DeadlineExceeded)
			c.release()
		}
		select {
		case <-<-got:
		case <-time.After(testenv.HangGuard(5 * time.Second)):
			t.Fatalf("round %d: Done not closed after the call ended", i)
		}
		require.Error(t, c.Err())
		cancel()
	}
}

// TestCtxSlab: a slab never hands a context out twice, so one a handler
// kept reads as ended while later calls run (borrow_ctx's reuse is a
// lane's own: TestLaneBorrowedCtx).
func TestCtxSlab(t *testing.T) {
	require.EqualValues(t, 72, unsafe.Sizeof(callCtx{}), "ctxSlabSize is chosen for 72-byte contexts")
	require.LessOrEqual(t, ctxSlabSize*unsafe.Sizeof(callCtx{}), uintptr(1024), "a block in the 1 KiB size class")
	require.Greater(t, (ctxSlabSize+1)*unsafe.Sizeof(callCtx{}), uintptr(1024), "the block fills its size class")
	var s ctxSlab
	parent := context.Background()
	first := s.next(parent, 0)
	first.release()
	seen := map[*callCtx]bool{first: true}
	for range 3 * ctxSlabSize {
		c := s.next(parent, deadlineAt(time.Since(epoch), time.Hour))
		require.False(t, seen[c], "a context handed out twice")
		seen[c] = true
		require.NoError(t, c.Err())
		dl, ok := c.Deadline()
		require.True(t, ok)
		require.WithinDuration(t, time.Now().Add(time.Hour), dl, time.Minute)
		c.release()
	}
	require.ErrorIs(t, first.Err(), context.Canceled)
	select {
	case <-first.Done():
	default:
		t.Fatal("a kept context's Done is open")
	}
}

// TestDeadlineSaturates: a peer's timeout of up to 2^63-1 ns is a deadline
// far away, never one that wrapped into the past.
func TestDeadlineSaturates(t *testing.T) {
	cases := []struct {
		name    string
		at      time.Duration
		timeout time.Duration
		want    time.Duration
	}{
		{"none", time.Second, 0, 0},
		{"negative", time.Second, -1, 0},
		{"ordinary", time.Second, time.Minute, time.Second + time.Minute},
		{"max", time.Second, math.MaxInt64, math.MaxInt64},
		{"edge", time.Second, math.MaxInt64 - time.Second, math.MaxInt64},
		{"one past edge", time.Second + 1, math.MaxInt64 - time.Second, math.MaxInt64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, deadlineAt(tc.at, tc.timeout))
		})
	}
	c := newCallCtx(context.Background(), math.MaxInt64)
	defer c.release()
	require.NoError(t, c.Err())
	dl, ok := c.Deadline()
	require.True(t, ok)
	require.True(t, dl.After(time.Now().Add(100*365*24*time.Hour)), "deadline %v", dl)
	select {
	case <-c.Done():
		t.Fatal("a call with the largest timeout ended at once")
	default:
	}
}

// TestCancelTable: a Cancel frame still finds every live call while ended
// ones are left for the reader to drop, and the table stays within twice
// what was live at the last prune (so a connection with a few calls in
// flight never holds thousands of ended contexts).
func TestCancelTable(t *testing.T) {
	cases := []struct {
		name  string
		live  int // calls kept running
		ended int // calls that end, after the live ones are added
	}{
		{"none live", 0, 1000},
		{"few live", 3, 1000},
		{"many live", 100, 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var (
				tab  cancelTable
				slab ctxSlab
				live []*callCtx
			)
			parent := context.Background()
			for i := range tc.live {
				c := slab.next(parent, 0)
				tab.add(int32(i), c)
				live = append(live, c)
			}
			for i := range tc.ended {
				c := slab.next(parent, 0)
				tab.add(int32(tc.live+i), c)
				c.release() // ended by its handler, without the table
				require.LessOrEqual(t, len(tab.m), max(pruneMin, 2*tc.live)+1)
			}
			for i, c := range live {
				require.Same(t, c, tab.find(int32(i)), "live call %d", i)
			}
			tab.pruneAll()
			require.Equal(t, tc.live, tab.size())
			for i, c := range live {
				require.Same(t, c, tab.find(int32(i)), "live call %d after the prune", i)
			}
			// A Cancel for an ended call that is still listed is a no-op.
			c := slab.next(parent, 0)
			tab.add(-1, c)
			c.release()
			tab.find(-1).cancel(context.Canceled)
			require.ErrorIs(t, c.Err(), context.Canceled)
		})
	}
}

// A context whose call sent only a request id makes its headers on the
// first look, once, whoever looks (goroutines of the handler may race):
// every look sees the same holder, so reply headers set through one are
// the call's; a context without headers answers the key as its parent.
func TestCallCtxRequestID(t *testing.T) {
	var s ctxSlab
	c := s.next(context.Background(), 0)
	c.rid, c.hasRID = [16]byte([]byte("0123456789abcdef")), true
	got := make(chan *metadata.ServerCall, 8)
	var wg sync.WaitGroup
	for range cap(got) {
		wg.Go(func() {
			md, ok := metadata.FromIncomingContext(c)
			assert.True(t, ok)
			assert.Equal(t, metadata.MD{metadata.RequestIDKey: "0123456789abcdef"}, md)
			sc, _ := metadata.ServerCallFrom(c)
			got <- sc
		})
	}
	wg.Wait()
	close(got)
	first := <-got
	require.NotNil(t, first)
	for sc := range got {
		require.Same(t, first, sc)
	}
	require.True(t, metadata.SetReply(c, "r", "1"))
	require.Equal(t, metadata.MD{"r": "1"}, c.sc.Load().Reply())
	require.Equal(t, "0123456789abcdef", metadata.RequestID(c))

	plain := s.next(context.Background(), 0)
	_, ok := metadata.FromIncomingContext(plain)
	require.False(t, ok)
	require.Equal(t, "", metadata.RequestID(plain))
	require.Nil(t, plain.sc.Load(), "no holder made for a call without headers")
}
