package wire

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// gateConn records every Write; while shut, a Write announces itself on
// entered and blocks until the gate opens.
type gateConn struct {
	mu      sync.Mutex
	writes  [][]byte
	shut    bool
	open    chan struct{}
	entered chan struct{}
	fail    error // every Write fails with it once set
}

func newGateConn() *gateConn {
	return &gateConn{open: make(chan struct{}), entered: make(chan struct{}, 1024)}
}

func (g *gateConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut {
		g.entered <- struct{}{}
		<-g.open
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		return 0, g.fail
	}
	g.writes = append(g.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (g *gateConn) shutGate() { g.mu.Lock(); g.shut = true; g.mu.Unlock() }

func (g *gateConn) openGate() {
	g.mu.Lock()
	g.shut = false
	g.mu.Unlock()
	close(g.open)
}

func (g *gateConn) snapshot() (n int, all []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.writes {
		all = append(all, w...)
	}
	return len(g.writes), all
}

// streamFrame is a sealed stream data frame of n payload bytes, its
// payload filled with b.
func streamFrame(id int32, n int, b byte) []byte {
	f := make([]byte, HeaderSize+n)
	for i := HeaderSize; i < len(f); i++ {
		f[i] = b
	}
	SealFrame(f, KindStreamData, 0, id, 0)
	return f
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func recv(t *testing.T, ctx context.Context, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal("timed out")
	}
}

// idle waits until w has nothing queued or being written.
func idle(t *testing.T, w *Writer) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.Wait(); close(done) }()
	recv(t, waitCtx(t), done)
}

func TestWriteStreamBatchesALoneSender(t *testing.T) {
	tests := []struct {
		name   string
		msgs   int
		size   int
		writes int
	}{
		// The first frame written by its sender, the second by the
		// writer's goroutine, the rest while it was in that write,
		// copied into chunks of postChunk bytes: one Write per chunk
		// here (a socket takes a round's chunks in one writev), 98
		// frames of 4 KiB filling 7.
		{"64 B", 200, 64, 3},
		{"4 KiB", 100, 4 << 10, 2 + 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := waitCtx(t)
			g := newGateConn()
			w := NewWriter(g, nil)
			var want []byte
			for i := range tt.msgs {
				f := streamFrame(1, tt.size, byte(i))
				want = append(want, f...)
				require.NoError(t, w.WriteStream(f, nil, i > 0))
				switch i {
				case 0:
					g.shutGate()
				case 1:
					// The writer's goroutine is inside the second
					// write: everything from now on queues behind it.
					recv(t, ctx, g.entered)
				}
			}
			g.openGate()
			idle(t, w)
			n, got := g.snapshot()
			require.Equal(t, want, got, "every frame, in order")
			require.Equal(t, tt.writes, n)
		})
	}
}

func TestWriteStreamDirectWhenIdle(t *testing.T) {
	g := newGateConn()
	w := NewWriter(g, nil)
	f := streamFrame(1, 64, 1)
	require.NoError(t, w.WriteStream(f, nil, false))
	// Written by the caller before WriteStream returned: no hand-off.
	n, got := g.snapshot()
	require.Equal(t, 1, n)
	require.Equal(t, f, got)
}

func TestWriteStreamKeepsOrderWithLargeValues(t *testing.T) {
	ctx := waitCtx(t)
	g := newGateConn()
	g.shutGate()
	w := NewWriter(g, nil)
	small := [][]byte{streamFrame(1, 64, 1), streamFrame(1, 64, 2), streamFrame(1, 64, 3)}
	require.NoError(t, w.WriteStream(small[0], nil, true))
	recv(t, ctx, g.entered)
	require.NoError(t, w.WriteStream(small[1], nil, true))

	big := bytes.Repeat([]byte{9}, RefMin)
	head := make([]byte, HeaderSize+1)
	head[HeaderSize] = 7
	refs := []proto.Ref{{Off: len(head), Data: big}}
	SealFrameRefs(head, refs, KindStreamData, 0, 1, 0)
	done := make(chan error, 1)
	go func() { done <- w.WriteStream(head, refs, true) }()
	g.openGate()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("timed out")
	}
	require.NoError(t, w.WriteStream(small[2], nil, true))
	idle(t, w)
	_, got := g.snapshot()
	want := append(append(append(append([]byte(nil), small[0]...), small[1]...), head...), big...)
	want = append(want, small[2]...)
	require.Equal(t, want, got)
}

func TestWriteStreamUnaryGoesAheadOfABacklog(t *testing.T) {
	ctx := waitCtx(t)
	g := newGateConn()
	g.shutGate()
	w := NewWriter(g, nil)
	require.NoError(t, w.WriteStream(streamFrame(1, 64, 0), nil, true))
	recv(t, ctx, g.entered)
	const size = 16 << 10
	frames := 3 * maxBatch / (size + HeaderSize) // three rounds' worth
	for i := range frames {
		require.NoError(t, w.WriteStream(streamFrame(1, size, byte(i)), nil, true))
	}
	unary := make([]byte, HeaderSize+8)
	SealFrame(unary, KindCall, 0, 5, 0)
	require.NoError(t, w.Write(unary))
	g.openGate()
	idle(t, w)
	_, got := g.snapshot()
	at := bytes.Index(got, unary)
	require.Positive(t, at)
	// Behind the frame being written and at most one batch, not the
	// whole backlog.
	require.LessOrEqual(t, at, HeaderSize+64+maxBatch+size+HeaderSize)
	require.Len(t, got, HeaderSize+64+frames*(size+HeaderSize)+len(unary))
}

func TestWriteStreamBoundsWhatItQueues(t *testing.T) {
	ctx := waitCtx(t)
	g := newGateConn()
	g.shutGate()
	w := NewWriter(g, nil)
	const size = 60 << 10
	total := 2 * maxPending / (size + HeaderSize)
	var posted atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := range total {
			if err := w.WriteStream(streamFrame(1, size, byte(i)), nil, true); err != nil {
				done <- err
				return
			}
			posted.Add(1)
		}
		done <- nil
	}()
	recv(t, ctx, g.entered)
	// Wait until the queue is full, counting the round being written: a
	// sender that filled it before the writer took its round is blocked
	// on a queue the round then left under maxPending (the writer wakes
	// senders only once its write ends; on a loaded machine the test
	// waited for postLen to reach maxPending again, 15 times in 100).
	for {
		w.mu.Lock()
		q, unwritten := w.postLen, w.postIn-w.postOut
		w.mu.Unlock()
		require.LessOrEqual(t, q, maxPending+size+HeaderSize)
		if unwritten >= maxPending {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("timed out")
		case <-time.After(time.Millisecond):
		}
	}
	require.Less(t, posted.Load(), int64(total))
	g.openGate()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("timed out")
	}
	idle(t, w)
	_, got := g.snapshot()
	require.Len(t, got, total*(size+HeaderSize))
}

func TestWriteStreamReportsAFailedWrite(t *testing.T) {
	ctx := waitCtx(t)
	g := newGateConn()
	g.shutGate()
	w := NewWriter(g, nil)
	boom := errors.New("connection reset")
	failed := make(chan error, 1)
	w.OnAsyncError(func(err error) { failed <- err })
	require.NoError(t, w.WriteStream(streamFrame(1, 64, 0), nil, true))
	recv(t, ctx, g.entered)
	g.mu.Lock()
	g.fail = boom
	g.mu.Unlock()
	g.openGate()
	select {
	case err := <-failed:
		require.ErrorIs(t, err, boom)
	case <-ctx.Done():
		t.Fatal("timed out")
	}
	// The sender's next write returns it.
	require.ErrorIs(t, w.WriteStream(streamFrame(1, 64, 1), nil, true), boom)
	require.ErrorIs(t, w.WriteStream(streamFrame(1, 64, 1), nil, false), boom)
	require.ErrorIs(t, w.Write(streamFrame(1, 64, 1)), boom)
}

// TestWriteStreamChunks: frames of sizes that straddle the posted queue's
// chunks, posted while a write is stuck, come out whole and in order, and
// the queue is empty afterwards (its chunks went back to the pool).
func TestWriteStreamChunks(t *testing.T) {
	ctx := waitCtx(t)
	g := newGateConn()
	// Shut before the first frame: the writer's goroutine, which may run
	// its write at once, then sticks in it (shut after the frame was
	// posted, a write already done left nothing to enter the gate, and
	// the wait below hung: 1 run in ~100 on a loaded host).
	g.shutGate()
	w := NewWriter(g, nil)
	var want []byte
	sizes := []int{5000, 1, postChunk - HeaderSize - 1, 70, 30000, 33333, postChunk - 2*HeaderSize, 7}
	for i := range 40 {
		f := streamFrame(1, sizes[i%len(sizes)], byte(i))
		want = append(want, f...)
		require.NoError(t, w.WriteStream(f, nil, true))
		if i == 0 {
			recv(t, ctx, g.entered)
		}
	}
	w.mu.Lock()
	queued := w.postLen
	chunks := len(w.posted)
	w.mu.Unlock()
	require.Positive(t, queued)
	require.Equal(t, (queued+postChunk-1)/postChunk, chunks, "chunks are filled before a new one starts")
	g.openGate()
	idle(t, w)
	_, got := g.snapshot()
	require.Equal(t, want, got, "every frame, whole and in order")
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Zero(t, w.postLen)
	require.Empty(t, w.posted)
	require.Equal(t, w.postIn, w.postOut)
}

// ownedFrame is streamFrame in a buffer of capacity c (at least its size).
func ownedFrame(id int32, n, c int, b byte) *[]byte {
	f := append(make([]byte, 0, max(c, HeaderSize+n)), streamFrame(id, n, b)...)
	return &f
}

// TestWriteStreamOwned: frames given with their buffers, posted while a
// write is stuck among frames given by WriteStream, come out whole and in
// order; those of ownMin bytes or more in a buffer at most twice their
// size are queued in that buffer (never appended to), the others copied
// into chunks; the queue is empty afterwards. An idle connection's frame
// is written by its sender; after a failed write the error comes back.
func TestWriteStreamOwned(t *testing.T) {
	tests := []struct {
		name  string
		n, c  int // payload, buffer capacity
		inBuf bool
	}{
		{"4 KiB in a pooled buffer", 4 << 10, 8 << 10, true},
		{"exactly ownMin", ownMin - HeaderSize, ownMin, true},
		{"small: copied", 100, 4096, false},
		{"buffer too large for it: copied", 4 << 10, 64 << 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := waitCtx(t)
			g := newGateConn()
			g.shutGate()
			w := NewWriter(g, nil)
			var want []byte
			for i := range 12 {
				if i%3 == 1 {
					f := streamFrame(1, 70, byte(i))
					want = append(want, f...)
					require.NoError(t, w.WriteStream(f, nil, true))
				} else {
					bp := ownedFrame(1, tt.n, tt.c, byte(i))
					want = append(want, *bp...)
					data := unsafe.SliceData(*bp)
					require.NoError(t, w.WriteStreamOwned(bp, true))
					if i > 0 {
						w.mu.Lock()
						last := w.posted[len(w.posted)-1]
						inBuf := unsafe.SliceData(last) == data
						w.mu.Unlock()
						require.Equal(t, tt.inBuf, inBuf, "frame %d queued in its own buffer", i)
					}
				}
				if i == 0 {
					// Posted (burst): the writer's goroutine is stuck in
					// its write, everything from now on queues.
					recv(t, ctx, g.entered)
				}
			}
			g.openGate()
			idle(t, w)
			_, got := g.snapshot()
			require.Equal(t, want, got, "every frame, whole and in order")
			w.mu.Lock()
			defer w.mu.Unlock()
			require.Zero(t, w.postLen)
			require.Empty(t, w.posted)
			require.Empty(t, w.postOwn)
			require.Equal(t, w.postIn, w.postOut)
		})
	}
	t.Run("idle: written by the sender", func(t *testing.T) {
		g := newGateConn()
		w := NewWriter(g, nil)
		bp := ownedFrame(1, 4<<10, 8<<10, 9)
		f := append([]byte(nil), *bp...)
		require.NoError(t, w.WriteStreamOwned(bp, false))
		n, got := g.snapshot()
		require.Equal(t, 1, n)
		require.Equal(t, f, got)
	})
	t.Run("after a failed write", func(t *testing.T) {
		ctx := waitCtx(t)
		g := newGateConn()
		g.shutGate()
		w := NewWriter(g, nil)
		boom := errors.New("connection reset")
		failed := make(chan error, 1)
		w.OnAsyncError(func(err error) { failed <- err })
		require.NoError(t, w.WriteStreamOwned(ownedFrame(1, 4<<10, 8<<10, 1), true))
		recv(t, ctx, g.entered)
		require.NoError(t, w.WriteStreamOwned(ownedFrame(1, 4<<10, 8<<10, 2), true), "queued behind the stuck write")
		g.mu.Lock()
		g.fail = boom
		g.mu.Unlock()
		g.openGate()
		select {
		case err := <-failed:
			require.ErrorIs(t, err, boom)
		case <-ctx.Done():
			t.Fatal("timed out")
		}
		require.ErrorIs(t, w.WriteStreamOwned(ownedFrame(1, 4<<10, 8<<10, 3), true), boom)
		require.ErrorIs(t, w.WriteStreamOwned(ownedFrame(1, 4<<10, 8<<10, 3), false), boom)
		w.mu.Lock()
		defer w.mu.Unlock()
		require.Empty(t, w.posted)
		require.Empty(t, w.postOwn)
	})
}
