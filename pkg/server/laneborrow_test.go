//go:build cgo && linux

package server_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// frameOf is the lane frame of a call (kind) of name with args.
func frameOf(t testing.TB, kind wire.Kind, name string, seqid int32, args proto.Struct) []byte {
	typ := proto.Call
	if kind == wire.KindOneway {
		typ = proto.Oneway
	}
	b, err := wiretest.Frame(proto.Binary, kind, typ, name, seqid, 0, nil, args)
	require.NoError(t, err)
	return b
}

// echoReply decodes an echo's lane reply frame.
func echoReply(t testing.TB, out []byte, seqid int32) []byte {
	h, err := wire.DecodeHeader(out, 1<<30)
	require.NoError(t, err)
	require.Equal(t, wire.KindReply, h.Kind, "reply %q", out)
	require.Equal(t, seqid, h.Seqid)
	mh, err := wire.ParseMsgHeader(h.Protocol(), out[wire.HeaderSize:])
	require.NoError(t, err)
	var res mix.EchoEchoResult
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	require.NoError(t, codec.Decode(h.Protocol(), out[wire.HeaderSize+mh.Body:], nil, &res))
	return res.Success
}

// within reports whether p lies in buf's memory.
func within(p, buf []byte) bool {
	if len(p) == 0 || len(buf) == 0 {
		return false
	}
	a, b := uintptr(unsafe.Pointer(&p[0])), uintptr(unsafe.Pointer(&buf[0]))
	return a >= b && a+uintptr(len(p)) <= b+uintptr(len(buf))
}

// borrowEcho is an echo (and a oneway "note") that reports where its
// argument lives (in the request frame or not) and keeps it, as a handler
// breaking the borrow_args promise would.
type borrowEcho struct {
	frame []byte // the request frame of the call in hand
	mu    sync.Mutex
	in    bool   // the last argument lay in frame
	kept  []byte // the last argument, kept past its call
	notes chan []byte
}

func (e *borrowEcho) service(fn *hints.Function) *server.Service {
	return &server.Service{Name: "Echo", Methods: []server.Method{
		{Name: "echo", Hints: fn, NewArgs: func() proto.Struct { return mix.NewEchoEchoArgs() },
			Handle: func(_ context.Context, a proto.Struct) (proto.Struct, error) {
				p := a.(*mix.EchoEchoArgs).Payload
				e.mu.Lock()
				e.in, e.kept = within(p, e.frame), p
				e.mu.Unlock()
				return &mix.EchoEchoResult{Success: p}, nil
			}},
		{Name: "note", Oneway: true, Hints: fn, NewArgs: func() proto.Struct { return mix.NewEchoEchoArgs() },
			Handle: func(_ context.Context, a proto.Struct) (proto.Struct, error) {
				e.notes <- a.(*mix.EchoEchoArgs).Payload
				return nil, nil
			}},
	}}
}

// TestLaneBorrowedArgs: on a lane or the FLOCK session, a borrow_args
// method's binary argument is a slice of the request's lease, unless the
// server runs WithOwnedArgs; either way the reply is complete when the
// call returns, so the engine may reuse the lease at once (here: the
// frame is overwritten) without touching it. A kept borrowed argument
// sees the reuse (why the hint is a promise); an owned one does not. A
// oneway call's handler runs after the lease is given back, so its
// argument is never in it.
func TestLaneBorrowedArgs(t *testing.T) {
	for _, owned := range []bool{false, true} {
		for _, viaFLOCK := range []bool{false, true} {
			t.Run(fmt.Sprintf("owned=%v/viaFLOCK=%v", owned, viaFLOCK), func(t *testing.T) {
				opts := []server.Option{server.WithLogger(quiet)}
				if owned {
					opts = append(opts, server.WithOwnedArgs())
				}
				s := server.New(opts...)
				e := &borrowEcho{notes: make(chan []byte, 1)}
				s.Register(e.service(&hints.Function{Name: "echo", Server: hints.Set{BorrowArgs: true}}))
				caller := server.LaneCaller
				if viaFLOCK {
					caller = server.FLOCKCaller
				}
				call, done := caller(s)
				defer done()
				for i, n := range []int{1, 64, 4096, 40 << 10} {
					seqid := int32(i + 1)
					p := bytes.Repeat([]byte{byte(i + 1)}, n)
					e.frame = frameOf(t, wire.KindCall, "echo", seqid, &mix.EchoEchoArgs{Payload: p})
					out := call(e.frame)
					e.mu.Lock()
					in, kept := e.in, e.kept
					e.mu.Unlock()
					require.Equal(t, !owned, in, "%d B: argument in the request's lease", n)
					clear(e.frame) // the engine reuses the lease once the reply is sent
					require.Equal(t, p, echoReply(t, out, seqid), "%d B: reply after the lease's reuse", n)
					if owned {
						require.Equal(t, p, kept, "%d B: an owned argument is the handler's", n)
					} else {
						require.Equal(t, make([]byte, n), kept, "%d B: a kept borrowed argument sees the reuse", n)
					}
				}
				p := []byte("note")
				e.frame = frameOf(t, wire.KindOneway, "note", 9, &mix.EchoEchoArgs{Payload: p})
				require.Nil(t, call(e.frame), "a oneway call gets no reply")
				select {
				case got := <-e.notes:
					require.False(t, within(got, e.frame), "a oneway handler's argument is not in the lease")
					clear(e.frame)
					require.Equal(t, p, got)
				case <-time.After(testenv.HangGuard(10 * time.Second)):
					t.Fatal("the oneway handler did not run")
				}
			})
		}
	}
}

// TestLaneBorrowedArgsLive: borrowed arguments over real lanes (a
// dedicated lane; FLOCK, on its workers and, never_blocks, on its
// dispatcher straight from the ring), from concurrent callers, small
// and large (replies from 16 KiB are built in the engine's own buffer):
// every reply is the caller's own argument, read from the lease before
// the engine reused it.
func TestLaneBorrowedArgsLive(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   hints.Function
	}{
		{"lane", hints.Function{Name: "echo", Server: hints.Set{BorrowArgs: true}}},
		{"flock", hints.Function{Name: "echo", Client: hints.Set{QPSharing: hints.SwitchOn, PayloadSize: 64},
			Server: hints.Set{PayloadSize: 64, BorrowArgs: true}}},
		{"flock-inline", hints.Function{Name: "echo", Client: hints.Set{QPSharing: hints.SwitchOn, PayloadSize: 64},
			Server: hints.Set{PayloadSize: 64, BorrowArgs: true, NeverBlocks: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
			defer cancel()
			s := server.New(server.WithLogger(quiet), server.WithRDMA(fastpathtest.Provider()))
			e := &borrowEcho{notes: make(chan []byte, 1)}
			s.Register(e.service(&tc.fn))
			addr := serveOn(t, s)
			m := &client.Method{Service: "Echo", Name: "echo", Hints: &tc.fn}
			sizes := []int{1, 64, 1000, 20 << 10, 40 << 10}
			const callers, calls = 4, 20
			var wg sync.WaitGroup
			for g := range callers {
				c := dial(t, addr) // open until the test ends: its lane is counted below
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range calls {
						n := sizes[(g+i)%len(sizes)]
						p := bytes.Repeat([]byte{byte(g*calls + i + 1)}, n)
						var res mix.EchoEchoResult
						if !assert.NoError(t, c.Call(ctx, m, &mix.EchoEchoArgs{Payload: p}, &res)) ||
							!assert.True(t, bytes.Equal(p, res.Success), "caller %d call %d (%d B): wrong reply", g, i, n) {
							return
						}
					}
				}()
			}
			wg.Wait()
			lanes, peers, _, _ := server.FastPathInUse(s)
			if tc.name == "lane" {
				require.Equal(t, callers, lanes, "the calls ran on lanes")
			} else {
				require.Equal(t, 1, peers, "the calls ran on FLOCK")
			}
		})
	}
}
