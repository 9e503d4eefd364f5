package flock

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flipAppend answers with the request's bytes inverted, appended to dst.
func flipAppend(_ context.Context, req, dst []byte) ([]byte, error) {
	for _, b := range req {
		dst = append(dst, ^b)
	}
	return dst, nil
}

func flipped(req []byte) []byte {
	out := make([]byte, len(req))
	for i, b := range req {
		out[i] = ^b
	}
	return out
}

// TestAppendHandlerAllocs: a 64-byte call answered by an AppendHandler
// allocates nothing on the dispatcher or on a worker (whose request copy
// is pooled too), one caller or more callers than Ps. Counted over the
// whole process: the server's side counts.
func TestAppendHandlerAllocs(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		callers int
	}{
		{"dispatcher", 0, 1},
		{"workers", 2, 1},
		{"workers, more callers than Ps", 2, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openDev(t)
			s := newServer(t, d, WithSchedInterval(0), WithWorkers(tt.workers))
			s.HandleAppend(hEcho, flipAppend)
			c, _ := dial(t, d, s, WithSchedInterval(0), WithQPs(2))
			ctx := tctx(t)
			req := bytes.Repeat([]byte{0x5a}, 64)
			defer backgroundCallers(ctx, c, tt.callers-1, hEcho, req)()
			cl := c.NewCaller()
			buf := make([]byte, 0, 64)
			var err error
			for range 200 { // warm up: rings, slot buffer, nodes, pools
				buf, err = cl.CallAppend(ctx, hEcho, req, buf[:0])
				require.NoError(t, err)
			}
			allocs := testing.AllocsPerRun(2000, func() {
				buf, err = cl.CallAppend(ctx, hEcho, req, buf[:0])
			})
			require.NoError(t, err)
			assert.Equal(t, flipped(req), buf)
			assert.Zero(t, allocs, "allocations per call")
		})
	}
}

// growAppend is flipAppend repeated: a 4 KiB request gets a response
// larger than one message (sent in parts).
func growAppend(ctx context.Context, req, dst []byte) ([]byte, error) {
	for range reps(req) {
		dst, _ = flipAppend(ctx, req, dst)
	}
	return dst, nil
}

func reps(req []byte) int { return 1 + len(req)/1024*3 }

// TestReusedResponseStorage: what the server keeps and reuses between
// responses never shows in another one. Concurrent callers send distinct
// requests of several sizes to three handlers at once: an AppendHandler
// (whose responses range from empty to larger than one message: split
// into parts),
// a Handler answering with its request (on a worker: the pooled request
// copy, which must outlive the handler in the response), and a Handler
// answering with a fixed slice, which must never be written to. Each
// caller checks every response byte; on the dispatcher and on workers,
// with both ways of sharing a QP.
func TestReusedResponseStorage(t *testing.T) {
	const hMirror, hFixed = 3, 4
	fixed := []byte("a response the handler keeps")
	keep := bytes.Clone(fixed)
	for _, workers := range []int{0, 4} {
		for _, mode := range sharingModes {
			t.Run(fmt.Sprintf("%s/workers=%d", mode.name, workers), func(t *testing.T) {
				d := openDev(t)
				s := newServer(t, d, append([]Option{WithSchedInterval(0), WithWorkers(workers)}, mode.opts...)...)
				s.HandleAppend(hEcho, growAppend)
				s.Handle(hMirror, mirror)
				s.Handle(hFixed, func(context.Context, []byte) ([]byte, error) { return fixed, nil })
				c, _ := dial(t, d, s, append([]Option{WithSchedInterval(0), WithQPs(2)}, mode.opts...)...)
				ctx := tctx(t)
				sizes := []int{0, 1, 64, 700, 4 << 10}
				require.Greater(t, reps(make([]byte, 4<<10))*4<<10, s.partSize(), "a response in parts")
				inParallel(t, 6, func(g int) error {
					cl := c.NewCaller()
					var buf []byte
					for i := range 120 {
						n := sizes[(g+i)%len(sizes)]
						req := bytes.Repeat([]byte{byte(g*31 + i)}, n)
						if n > 0 {
							req[0], req[n-1] = byte(g), byte(i)
						}
						var err error
						switch i % 3 {
						case 0:
							if buf, err = cl.CallAppend(ctx, hEcho, req, buf[:0]); err == nil && !bytes.Equal(bytes.Repeat(flipped(req), reps(req)), buf) {
								err = fmt.Errorf("caller %d call %d: append handler's %d bytes wrong", g, i, n)
							}
						case 1:
							if buf, err = cl.CallAppend(ctx, hMirror, req, buf[:0]); err == nil && !bytes.Equal(req, buf) {
								err = fmt.Errorf("caller %d call %d: mirrored %d bytes wrong", g, i, n)
							}
						default:
							if buf, err = cl.CallAppend(ctx, hFixed, req, buf[:0]); err == nil && !bytes.Equal(keep, buf) {
								err = fmt.Errorf("caller %d call %d: fixed response wrong: %q", g, i, buf)
							}
						}
						if err != nil {
							return err
						}
					}
					return nil
				})
				require.Equal(t, keep, fixed, "a Handler's own response was written to")
			})
		}
	}
}

// TestAppendHandlerError: an AppendHandler's error reaches the caller as
// a HandlerError, and the next call's response is whole.
func TestAppendHandlerError(t *testing.T) {
	d := openDev(t)
	s := newServer(t, d, WithSchedInterval(0), WithWorkers(1))
	s.HandleAppend(hEcho, func(ctx context.Context, req, dst []byte) ([]byte, error) {
		if string(req) == "fail" {
			return append(dst, "partial"...), fmt.Errorf("refused %q", req)
		}
		return flipAppend(ctx, req, dst)
	})
	c, _ := dial(t, d, s, WithSchedInterval(0))
	ctx := tctx(t)
	_, err := c.Call(ctx, hEcho, []byte("fail"))
	var he *HandlerError
	require.ErrorAs(t, err, &he)
	require.Equal(t, `refused "fail"`, he.Msg)
	resp, err := c.Call(ctx, hEcho, []byte("ok"))
	require.NoError(t, err)
	require.Equal(t, flipped([]byte("ok")), resp)
}

// TestPooledBuffersBounded: what the server keeps between calls is
// bounded whatever the traffic: after many concurrent callers with
// responses below and above the size kept, the pool holds at most
// maxFreeBufs buffers of at most keepMax bytes, and no dispatcher node
// holds one past its message.
func TestPooledBuffersBounded(t *testing.T) {
	const hInline = 5
	d := openDev(t)
	s, err := NewServer(d, WithSchedInterval(0), WithWorkers(4),
		WithInline(func(h uint16, _ []byte) bool { return h == hInline }))
	require.NoError(t, err)
	big := func(_ context.Context, req, dst []byte) ([]byte, error) {
		for range int(req[0]) {
			dst = append(dst, make([]byte, 1<<10)...)
		}
		return dst, nil
	}
	s.HandleAppend(hEcho, big)
	s.HandleAppend(hInline, big)
	c, _ := dial(t, d, s, WithSchedInterval(0), WithQPs(2))
	ctx := tctx(t)
	inParallel(t, 16, func(g int) error {
		cl := c.NewCaller()
		var buf []byte
		for i := range 60 {
			kib := []byte{1, 8, 15, 17, 24}[(g+i)%5]
			h := uint16(hEcho)
			if i%2 == 1 {
				h = hInline
			}
			var err error
			if buf, err = cl.CallAppend(ctx, h, []byte{kib}, buf[:0]); err != nil {
				return err
			}
			if len(buf) != int(kib)<<10 {
				return fmt.Errorf("caller %d call %d: %d bytes, want %d KiB", g, i, len(buf), kib)
			}
		}
		return nil
	})
	qps := *s.qps.Load()
	require.NoError(t, s.Close()) // the dispatcher and workers are done: their nodes can be read
	p := &s.nodes.bufs
	require.LessOrEqual(t, len(p.free), maxFreeBufs)
	for _, bp := range p.free {
		require.LessOrEqual(t, cap(*bp), keepMax)
	}
	for _, l := range qps {
		for _, in := range l.inline {
			require.Nil(t, in.out, "a dispatcher node kept its buffer past its message")
		}
	}
}
