package flock

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mirror answers with the request itself: a handler on the dispatcher
// reads req in the ring, and the response is copied out before the ring
// moves on, so it needs no memory of its own.
func mirror(_ context.Context, req []byte) ([]byte, error) { return req, nil }

// TestCallAllocs: a 64-byte call through FLOCK (caller, combining queue,
// post, server dispatcher, handler, response leader, client dispatcher,
// response slot) allocates nothing with CallAppend into a reused buffer,
// whether the caller answers itself from its slot or parks. Counted over
// the whole process, so the server's side counts too.
func TestCallAllocs(t *testing.T) {
	tests := []struct {
		name    string
		callers int
	}{
		{"one caller", 1},
		{"more callers than Ps (they park)", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openDev(t)
			s := newServer(t, d, WithSchedInterval(0))
			s.Handle(hEcho, mirror)
			c, _ := dial(t, d, s, WithSchedInterval(0), WithQPs(2))
			ctx := tctx(t)
			req := make([]byte, 64)
			for i := range req {
				req[i] = byte(i)
			}
			// Background callers keep more calls in flight than Ps.
			defer backgroundCallers(ctx, c, tt.callers-1, hEcho, req)()
			cl := c.NewCaller()
			buf := make([]byte, 0, 64)
			var err error
			for i := 0; i < 200; i++ { // warm up: rings, slot buffer, pools
				buf, err = cl.CallAppend(ctx, hEcho, req, buf[:0])
				require.NoError(t, err)
			}
			allocs := testing.AllocsPerRun(2000, func() {
				buf, err = cl.CallAppend(ctx, hEcho, req, buf[:0])
			})
			require.NoError(t, err)
			assert.Equal(t, req, buf)
			assert.Zero(t, allocs, "allocations per call")
		})
	}
}

// backgroundCallers starts n callers of handler h with req, each in a
// loop until the returned function stops them (and waits for them).
func backgroundCallers(ctx context.Context, c *Conn, n int, h uint16, req []byte) (stop func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range n {
		cl := c.NewCaller()
		wg.Go(func() {
			buf := make([]byte, 0, 64)
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := cl.CallAppend(ctx, h, req, buf[:0]); err != nil {
					return
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// BenchmarkCallAppend64: one caller, 64-byte calls answered on the
// server's dispatcher, no per-call allocation (-benchmem: 0 allocs/op).
func BenchmarkCallAppend64(b *testing.B) {
	d := openDev(b)
	s := newServer(b, d, WithSchedInterval(0))
	s.Handle(hEcho, mirror)
	c, _ := dial(b, d, s, WithSchedInterval(0))
	ctx := tctx(b)
	cl := c.NewCaller()
	req := make([]byte, 64)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var err error
		if buf, err = cl.CallAppend(ctx, hEcho, req, buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestInlineBesideWorkers: with WithWorkers, requests WithInline accepts
// run on the dispatcher. The one worker is held by a blocked handler; an
// inline handler still answers (it needs no worker), with a request read
// in place and no allocation, and the blocked call completes once
// released.
func TestInlineBesideWorkers(t *testing.T) {
	const hBlock, hFast = 3, 4
	d := openDev(t)
	s := newServer(t, d, WithSchedInterval(0), WithWorkers(1),
		WithInline(func(h uint16, _ []byte) bool { return h == hFast }))
	release := make(chan struct{})
	entered := make(chan struct{})
	s.Handle(hBlock, func(ctx context.Context, req []byte) ([]byte, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return []byte("unblocked"), nil
	})
	s.Handle(hFast, mirror)
	c, _ := dial(t, d, s, WithSchedInterval(0), WithQPs(1))
	ctx := tctx(t)

	blocked := make(chan error, 1)
	go func() {
		resp, err := c.Call(ctx, hBlock, []byte("x"))
		if err == nil && string(resp) != "unblocked" {
			err = fmt.Errorf("blocked call answered %q", resp)
		}
		blocked <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the blocking handler never ran")
	}

	cl := c.NewCaller()
	req := []byte("fast path, worker busy")
	buf := make([]byte, 0, 64)
	for i := 0; i < 100; i++ {
		var err error
		buf, err = cl.CallAppend(ctx, hFast, req, buf[:0])
		require.NoError(t, err)
		require.Equal(t, req, buf)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		buf, _ = cl.CallAppend(ctx, hFast, req, buf[:0])
	})
	assert.Zero(t, allocs, "allocations per inline call")
	assert.Equal(t, req, buf)

	close(release)
	select {
	case err := <-blocked:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the blocked call never completed")
	}
}
