package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/bench/gen/atb"
	"github.com/hatrpc/hatrpc/internal/bench/gen/atb/atbserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// serveEcho serves h as atb's echo with the benchmark's message limits
// (plus sopts) on a fresh port and dials it with copts; connection and
// server end with the test.
func serveEcho(ctx context.Context, t *testing.T, h atb.EchoHandler, sopts []server.Option, copts ...client.Option) *atb.EchoClient {
	t.Helper()
	return atb.NewEchoClient(serveEchoConn(ctx, t, h, sopts, copts...))
}

// serveEchoConn is serveEcho returning the client's Conn.
func serveEchoConn(ctx context.Context, t *testing.T, h atb.EchoHandler, sopts []server.Option, copts ...client.Option) *client.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	lim := proto.DefaultLimits
	lim.MaxMessageSize, lim.MaxStringLength = maxMessage, maxMessage
	opts := append([]server.Option{server.WithLimits(lim), server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, sopts...)
	srv := server.New(opts...)
	atbserver.RegisterEcho(srv, h)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(sctx))
		<-served
	})
	conn, err := client.Dial(ctx, ln.Addr().String(), copts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// eachCall runs f(g, i) for i < calls on each of callers goroutines g and
// waits for them; a goroutine stops at its first false.
func eachCall(callers, calls int, f func(g, i int) bool) {
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				if !f(g, i) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// keepingEcho answers with a copy and keeps every argument it was given,
// so the test can check later that no argument was overwritten.
type keepingEcho struct {
	mu   sync.Mutex
	args [][]byte
}

func (k *keepingEcho) Echo(_ context.Context, payload []byte) ([]byte, error) {
	k.mu.Lock()
	k.args = append(k.args, payload)
	k.mu.Unlock()
	return bytes.Clone(payload), nil
}

// TestLargePayloadOwnership: large binaries are decoded by aliasing pooled
// frame buffers on both ends (wire.DecodeAliased / wire.Adopt). Arguments
// a handler keeps and results a caller keeps must stay intact however many
// calls and collections follow.
func TestLargePayloadOwnership(t *testing.T) {
	tests := []struct {
		name string
		size int
		opts []client.Option
	}{
		{"64KiB binary", 64 << 10, nil},
		{"200KiB binary", 200 << 10, nil},
		{"64KiB compact", 64 << 10, []client.Option{client.WithCompact()}},
		{"1KiB (copied)", 1 << 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// keepingEcho keeps its arguments: it must not borrow them
			// (atb.thrift's echo carries borrow_args = on).
			h := &keepingEcho{}
			c := serveEcho(ctx, t, h, []server.Option{server.WithOwnedArgs()}, tt.opts...)

			const callers, calls = 8, 12
			pattern := func(g, i int) []byte {
				return bytes.Repeat([]byte{byte(g*calls + i + 1)}, tt.size)
			}
			kept := make([][][]byte, callers)
			eachCall(callers, calls, func(g, i int) bool {
				rep, err := c.Echo(ctx, pattern(g, i))
				if !assert.NoError(t, err) {
					return false
				}
				kept[g] = append(kept[g], rep)
				if i%4 == 3 {
					runtime.GC() // lets finalizers recycle buffers nobody holds
				}
				return true
			})
			runtime.GC()
			runtime.GC()
			// Recycled buffers are reused by these calls; the kept ones must not be.
			for i := range 2 * calls {
				_, err := c.Echo(ctx, bytes.Repeat([]byte{0xee}, tt.size))
				require.NoError(t, err, "filler %d", i)
			}
			for g := range callers {
				require.Len(t, kept[g], calls)
				for i, rep := range kept[g] {
					assert.True(t, bytes.Equal(pattern(g, i), rep), "caller %d call %d: result overwritten", g, i)
				}
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, a := range h.args {
				require.Len(t, a, tt.size)
				assert.True(t, bytes.Equal(a, bytes.Repeat(a[:1], tt.size)), "handler argument overwritten")
			}
		})
	}
}

// aliasEcho returns its argument itself, the case borrow_args must get
// right: the reply is encoded from the request's buffer before the server
// reuses it. It records whether a 4 KiB argument came as a slice of the
// request buffer (borrowed) or as an allocation of its own. Decoded
// values are capped at their length either way, so it tells them apart by
// address: a 4 KiB allocation is at least 8-byte aligned, while a value
// inside a frame starts after the frame and message headers, at an odd
// offset in every encoding tested here (43, 27, 11, ... bytes).
type aliasEcho struct {
	mu       sync.Mutex
	borrowed map[bool]int
}

func (a *aliasEcho) Echo(_ context.Context, payload []byte) ([]byte, error) {
	if len(payload) == 4096 {
		a.mu.Lock()
		a.borrowed[uintptr(unsafe.Pointer(unsafe.SliceData(payload)))%8 != 0]++
		a.mu.Unlock()
	}
	return payload, nil
}

// echoEncoding is a client configuration the borrowing tests run under.
type echoEncoding struct {
	name string
	opts []client.Option
}

// echoEncodings covers HatRPC framing and plain Thrift, binary and compact.
var echoEncodings = []echoEncoding{
	{"hatrpc-binary", nil},
	{"hatrpc-compact", []client.Option{client.WithCompact()}},
	{"plain-framed", []client.Option{client.WithoutUpgrade(), client.WithFramed()}},
	{"plain-unframed-compact", []client.Option{client.WithoutUpgrade(), client.WithCompact()}},
}

// TestBorrowedArgs: with atb.thrift's borrow_args hint a handler's binary
// argument is a slice of the request buffer (WithOwnedArgs turns that off),
// and echoing it back is safe under concurrency for every encoding, small
// (copied into the reply) and large (written from the argument) alike.
func TestBorrowedArgs(t *testing.T) {
	for _, owned := range []bool{false, true} {
		for _, enc := range echoEncodings {
			t.Run(fmt.Sprintf("owned=%v/%s", owned, enc.name), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				var sopts []server.Option
				if owned {
					sopts = append(sopts, server.WithOwnedArgs())
				}
				h := &aliasEcho{borrowed: map[bool]int{}}
				c := serveEcho(ctx, t, h, sopts, enc.opts...)

				sizes := []int{0, 100, 4096, 40 << 10, 200 << 10}
				const callers, calls = 8, 10
				eachCall(callers, calls, func(g, i int) bool {
					n := sizes[(g+i)%len(sizes)]
					p := bytes.Repeat([]byte{byte(g*calls + i + 1)}, n)
					rep, err := c.Echo(ctx, p)
					return assert.NoError(t, err) &&
						assert.True(t, bytes.Equal(p, rep), "caller %d call %d (%d bytes): wrong reply", g, i, n)
				})
				h.mu.Lock()
				defer h.mu.Unlock()
				assert.Equal(t, map[bool]int{!owned: callers * calls / len(sizes)}, h.borrowed,
					"4 KiB arguments borrowed (true) or owned (false)")
			})
		}
	}
}

// TestBorrowedResults: EchoBorrowed hands use the result in place, for
// every encoding and size, concurrently; use runs exactly once per call and
// its error is the call's; with interceptors the result is an owned copy
// and use still runs.
func TestBorrowedResults(t *testing.T) {
	var intercepted atomic.Int64
	count := func(ctx context.Context, m *client.Method, args, result proto.Struct, next client.Invoker) error {
		intercepted.Add(1)
		return next(ctx, m, args, result)
	}
	tests := append(echoEncodings[:len(echoEncodings):len(echoEncodings)],
		echoEncoding{"interceptors", []client.Option{client.WithInterceptors(count)}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c := serveEcho(ctx, t, &aliasEcho{borrowed: map[bool]int{}}, nil, tt.opts...)
			sizes := []int{0, 100, 4096, 40 << 10, 200 << 10}
			const callers, calls = 8, 10
			var uses atomic.Int64
			eachCall(callers, calls, func(g, i int) bool {
				p := bytes.Repeat([]byte{byte(g*calls + i + 1)}, sizes[(g+i)%len(sizes)])
				err := c.EchoBorrowed(ctx, p, func(r []byte) error {
					uses.Add(1)
					assert.True(t, bytes.Equal(p, r), "caller %d call %d (%d bytes): wrong result", g, i, len(p))
					return nil
				})
				return assert.NoError(t, err)
			})
			assert.Equal(t, int64(callers*calls), uses.Load())

			errMine := errors.New("mine")
			err := c.EchoBorrowed(ctx, []byte("x"), func([]byte) error { return errMine })
			assert.ErrorIs(t, err, errMine)
			if tt.name == "interceptors" {
				assert.Equal(t, int64(callers*calls+1), intercepted.Load())
			}
		})
	}
}

type failingEcho struct{}

func (failingEcho) Echo(context.Context, []byte) ([]byte, error) { return nil, errors.New("boom") }

// TestBorrowedResultException: an exception reply is the call's error and
// use does not run.
func TestBorrowedResultException(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := serveEcho(ctx, t, failingEcho{}, nil)
	ran := false
	err := c.EchoBorrowed(ctx, []byte("x"), func([]byte) error { ran = true; return nil })
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, proto.ExcInternalError, ae.Type)
	assert.False(t, ran)
}
