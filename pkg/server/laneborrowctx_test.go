//go:build cgo && linux

package server_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// ctxSeen is what a handler saw of its context during one call.
type ctxSeen struct {
	ptr      string // the context's identity
	err      error
	deadline bool
	md       metadata.MD
	room     error // ReserveReply's answer for a small reply
	keptErr  error // the previous call's context, kept: its Err now
	closed   bool  // its Done channel was closed (looked at only when asked)
}

// TestLaneBorrowedCtx: a dedicated lane's calls of a borrow_ctx method
// run with one context, reset between calls (live, its own deadline,
// its own headers, its reply room), unless the server runs
// WithOwnedArgs or the hint is off; a handler that asked for Done gets a
// fresh one for the next call, since the deadline timer or parent watch
// it set up may still fire. A context kept past its call reads as the
// next call's (why the hint is a promise); one not borrowed reads as
// cancelled.
func TestLaneBorrowedCtx(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    hints.Set
		owned  bool
		reused bool
	}{
		{"borrow_ctx", hints.Set{BorrowCtx: true}, false, true},
		{"borrow_ctx with borrow_args", hints.Set{BorrowCtx: true, BorrowArgs: true}, false, true},
		{"off", hints.Set{}, false, false},
		{"owned", hints.Set{BorrowCtx: true}, true, false},
	} {
		for _, full := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/full=%v", tc.name, full), func(t *testing.T) {
				opts := []server.Option{server.WithLogger(quiet)}
				if tc.owned {
					opts = append(opts, server.WithOwnedArgs())
				}
				s := server.New(opts...)
				var (
					seen      []ctxSeen
					kept      context.Context
					askDone   bool
					checkDone bool
				)
				fn := &hints.Function{Name: "echo", Server: tc.set}
				s.Register(&server.Service{Name: "Echo", Methods: []server.Method{
					{Name: "echo", Hints: fn, NewArgs: func() proto.Struct { return mix.NewEchoEchoArgs() },
						Handle: func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
							v := ctxSeen{ptr: fmt.Sprintf("%p", ctx), err: ctx.Err(), room: server.ReserveReply(ctx, 64)}
							_, v.deadline = ctx.Deadline()
							v.md, _ = metadata.FromIncomingContext(ctx)
							if kept != nil {
								v.keptErr = kept.Err()
							}
							seen = append(seen, v)
							kept = ctx
							if askDone {
								_ = ctx.Done()
							}
							if checkDone {
								select {
								case <-ctx.Done():
									seen[len(seen)-1].closed = true
								default:
								}
							}
							return &mix.EchoEchoResult{Success: a.(*mix.EchoEchoArgs).Payload}, nil
						}},
				}})
				call, done := server.LaneCaller(s)
				if full {
					call, done = server.FullLaneCaller(s)
				}
				defer done()
				run := func(seqid int32, timeout time.Duration, md metadata.MD) {
					t.Helper()
					p := []byte(fmt.Sprint("call ", seqid))
					req, err := wiretest.Frame(proto.Binary, wire.KindCall, proto.Call, "echo", seqid, timeout, md, &mix.EchoEchoArgs{Payload: p})
					require.NoError(t, err)
					require.Equal(t, p, echoReply(t, call(req), seqid))
				}
				run(1, time.Hour, metadata.MD{"k": "v"})
				run(2, 0, nil)
				run(3, 0, nil)
				askDone = true
				run(4, time.Hour, nil) // asks for Done: not reused after
				askDone = false
				run(5, 0, nil)
				run(6, 0, nil)
				// A handler breaking the promise: call 6's context asked
				// for Done after its call ended (its channel closes at
				// once). Call 7 must not inherit the closed channel.
				_ = kept.Done()
				checkDone = true
				run(7, 0, nil)

				require.Len(t, seen, 7)
				require.False(t, seen[6].closed, "call 7's Done is open")
				require.False(t, seen[6].ptr == seen[5].ptr, "call 7 does not reuse a context asked for Done")
				seen = seen[:6]
				for i, v := range seen {
					require.NoError(t, v.err, "call %d: its context is live", i+1)
					require.NoError(t, v.room, "call %d: its reply room", i+1)
					require.Equal(t, i == 0 || i == 3, v.deadline, "call %d: its own deadline", i+1)
					if i == 0 {
						require.Equal(t, "v", v.md["k"], "call 1's header")
					} else {
						require.Empty(t, v.md["k"], "call %d: no header of call 1's", i+1)
					}
				}
				same := func(a, b int) bool { return seen[a-1].ptr == seen[b-1].ptr }
				require.Equal(t, tc.reused, same(1, 2), "call 2 reuses call 1's context")
				require.Equal(t, tc.reused, same(2, 3), "call 3 reuses call 2's context")
				require.Equal(t, tc.reused, same(3, 4), "call 4 reuses call 3's context")
				require.False(t, same(4, 5), "call 4 asked for Done: call 5 gets a fresh context")
				require.Equal(t, tc.reused, same(5, 6), "call 6 reuses call 5's context")
				if tc.reused {
					require.NoError(t, seen[2].keptErr, "a context kept past its call reads as the next call's")
					require.Equal(t, context.Canceled, seen[4].keptErr, "call 4's context (Done asked) stays its own")
				} else {
					for i := 1; i < 6; i++ {
						require.Equal(t, context.Canceled, seen[i].keptErr, "call %d's kept context ended", i)
					}
				}
			})
		}
	}
}

// TestLaneBorrowedCtxLive: borrow_ctx over real lanes (the provider's:
// shm here, ibv in the VM suite), four callers on lanes of their own,
// calls with a long deadline and headers and with a short one and none, some handlers asking
// for Done: each handler sees a live context carrying exactly its own
// call's deadline and headers, never an earlier call's.
func TestLaneBorrowedCtxLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	long, stopLong := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Minute)
	defer stopLong()
	fn := &hints.Function{Name: "echo", Server: hints.Set{BorrowCtx: true, BorrowArgs: true}}
	s := server.New(server.WithLogger(quiet), server.WithRDMA(fastpathtest.Provider()))
	s.Register(&server.Service{Name: "Echo", Methods: []server.Method{
		{Name: "echo", Hints: fn, NewArgs: func() proto.Struct { return mix.NewEchoEchoArgs() },
			Handle: func(ctx context.Context, _ proto.Struct) (proto.Struct, error) {
				md, _ := metadata.FromIncomingContext(ctx)
				if md["done"] == "true" {
					_ = ctx.Done()
				}
				// The odd calls' 20 minutes, not the others' guard.
				dl, _ := ctx.Deadline()
				seen := fmt.Sprintf("call=%s long=%v err=%v", md["call"], time.Until(dl) > 10*time.Minute, ctx.Err())
				return &mix.EchoEchoResult{Success: []byte(seen)}, nil
			}},
	}})
	addr := serveOn(t, s)
	m := &client.Method{Service: "Echo", Name: "echo", Hints: fn}
	const callers, calls = 4, 60
	var wg sync.WaitGroup
	for g := range callers {
		c := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				cctx, want := ctx, "call= long=false err=<nil>"
				if i%2 == 1 {
					id := fmt.Sprint(g, ".", i)
					cctx = metadata.AppendToOutgoingContext(long, "call", id, "done", strconv.FormatBool(i%10 == 3))
					want = "call=" + id + " long=true err=<nil>"
				}
				var res mix.EchoEchoResult
				if !assert.NoError(t, c.Call(cctx, m, &mix.EchoEchoArgs{Payload: []byte("x")}, &res)) ||
					!assert.Equal(t, want, string(res.Success), "caller %d call %d", g, i) {
					return
				}
			}
		}()
	}
	wg.Wait()
	lanes, _, _, _ := server.FastPathInUse(s)
	require.Equal(t, callers, lanes, "the calls ran on lanes")
}
