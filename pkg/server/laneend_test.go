//go:build cgo && linux

package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestLaneCallEndsAfterReply: a lane's call keeps its context, its call
// slot and its place in in_flight until the lane has handed its reply
// over (what rdma.AfterReply runs), and is then counted once, by outcome
// and in the duration histogram. Between the two, the server's only slot
// is still taken: another lane's call is turned away busy.
func TestLaneCallEndsAfterReply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    int32
		kind    wire.Kind
		outcome string
		errors  float64
	}{
		{"ok", wiretest.ModeEcho, wire.KindReply, proto.OutcomeOK, 0},
		{"failed", wiretest.ModePlain, wire.KindException, "internal_error", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kept context.Context
			reply := func(msg string) proto.Struct { return &wiretest.EchoResult{Success: &msg} }
			s := server.New(server.WithLogger(quiet), server.WithMaxConcurrentCalls(1), server.WithBusyTimeout(time.Millisecond))
			s.Register(&server.Service{Name: "End", Methods: []server.Method{
				{Name: "keep", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
					Handle: func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
						kept = ctx
						if a.(*wiretest.EchoArgs).Mode == wiretest.ModePlain {
							return nil, errors.New("failed")
						}
						return reply("kept"), nil
					}},
				{Name: "quick", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
					Handle: func(context.Context, proto.Struct) (proto.Struct, error) { return reply("quick"), nil }},
			}})
			call, after, done := server.SplitLaneCaller(s)
			defer done()
			other, doneOther := server.LaneCaller(s)
			defer doneOther()
			kind := func(out []byte) wire.Kind {
				t.Helper()
				h, err := wire.DecodeHeader(out, 1<<20)
				require.NoError(t, err)
				return h.Kind
			}
			value := func(name string, labels map[string]string) float64 {
				t.Helper()
				mfs, err := s.Registry().Gather()
				require.NoError(t, err)
				return metricValue(mfs, name, labels)
			}
			keep := map[string]string{"function": "keep"}

			req, err := wiretest.Frame(proto.Binary, wire.KindCall, proto.Call, "keep", 1, 0, nil,
				&wiretest.EchoArgs{Msg: "x", Mode: tc.mode})
			require.NoError(t, err)
			require.Equal(t, tc.kind, kind(call(req)))
			require.NotNil(t, kept)
			require.NoError(t, kept.Err(), "the context lives until the reply is out")
			require.Equal(t, 1.0, value("hatrpc_server_in_flight", keep))
			require.Zero(t, value("hatrpc_server_handled_total", keep))
			require.Zero(t, value("hatrpc_server_call_duration_seconds", keep))
			require.Equal(t, wire.KindException, kind(other(laneRequest(t, "quick", "x", 2, 0))), "the slot is still taken")
			require.Equal(t, 1.0, value("hatrpc_server_rejected_total", map[string]string{"reason": "busy"}))

			after()
			require.ErrorIs(t, kept.Err(), context.Canceled)
			require.Zero(t, value("hatrpc_server_in_flight", keep))
			require.Equal(t, 1.0, value("hatrpc_server_calls_total", keep))
			require.Equal(t, 1.0, value("hatrpc_server_handled_total", keep))
			require.Equal(t, 1.0, value("hatrpc_server_handled_total", map[string]string{"function": "keep", "outcome": tc.outcome}))
			require.Equal(t, tc.errors, value("hatrpc_server_errors_total", keep))
			require.Equal(t, 1.0, value("hatrpc_server_call_duration_seconds", keep))
			require.Equal(t, wire.KindReply, kind(other(laneRequest(t, "quick", "x", 3, 0))), "the slot was given back")
			after() // nothing left: a second run counts nothing
			require.Equal(t, 1.0, value("hatrpc_server_handled_total", keep))
		})
	}
}
