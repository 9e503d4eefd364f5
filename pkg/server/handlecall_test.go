//go:build cgo && linux

package server_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
)

// TestHandleCall: a method with NewCall and HandleCall runs HandleCall
// with NewCall's value, also under interceptors that pass the arguments
// on; an interceptor that replaces them gets Handle, with its own. A
// lane without interceptors hands a call's value back to NewCall once
// its reply is encoded (each later call reuses it); with interceptors
// every call gets a fresh one.
func TestHandleCall(t *testing.T) {
	type call struct {
		args mix.EchoEchoArgs
		tag  string
	}
	pass := func(ctx context.Context, _ *server.CallInfo, a proto.Struct, next server.Handler) (proto.Struct, error) {
		return next(ctx, a)
	}
	replace := func(ctx context.Context, _ *server.CallInfo, a proto.Struct, next server.Handler) (proto.Struct, error) {
		return next(ctx, &mix.EchoEchoArgs{Payload: append([]byte("new:"), a.(*mix.EchoEchoArgs).Payload...)})
	}
	reply := func(how string, p []byte) (proto.Struct, error) {
		return &mix.EchoEchoResult{Success: append([]byte(how+":"), p...)}, nil
	}
	for _, tc := range []struct {
		name          string
		ics           []server.Interceptor
		want          string
		fresh, reused int // NewCall's calls with a nil and a reused value, for 3 calls
	}{
		{"plain", nil, "call:tagged:x", 1, 3},
		{"passed on", []server.Interceptor{pass, pass}, "call:tagged:x", 3, 0},
		{"replaced", []server.Interceptor{pass, replace}, "handle:new:x", 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				fresh, reused int
				last          *call
			)
			s := server.New(server.WithLogger(quiet), server.WithInterceptors(tc.ics...))
			s.Register(&server.Service{Name: "Echo", Methods: []server.Method{{Name: "echo",
				NewArgs: func() proto.Struct { t.Error("NewArgs called: NewCall is set"); return new(mix.EchoEchoArgs) },
				Handle: func(_ context.Context, a proto.Struct) (proto.Struct, error) {
					return reply("handle", a.(*mix.EchoEchoArgs).Payload)
				},
				NewCall: func(reuse any) (proto.Struct, any) {
					c, _ := reuse.(*call)
					if c == nil {
						fresh++
						c = new(call)
					} else {
						reused++
						require.Same(t, last, c, "the lane's last call value")
					}
					*c = call{tag: "tagged"}
					last = c
					return &c.args, c
				},
				HandleCall: func(_ context.Context, v any) (proto.Struct, error) {
					c := v.(*call)
					return reply("call", append([]byte(c.tag+":"), c.args.Payload...))
				},
			}}})
			do, done := server.LaneCaller(s)
			defer done()
			for i := range int32(3) {
				out := do(frameOf(t, wire.KindCall, "echo", i, &mix.EchoEchoArgs{Payload: []byte("x")}))
				require.True(t, bytes.Equal([]byte(tc.want), echoReply(t, out, i)), "reply %q", out)
			}
			require.Equal(t, tc.fresh, fresh, "fresh call values")
			require.Equal(t, tc.reused, reused, "reused call values")
		})
	}
}
