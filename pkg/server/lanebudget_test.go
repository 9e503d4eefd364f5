//go:build cgo && linux

package server

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// attachConn is a connection as grantLane sees it; the server's device is
// never opened (grantLane only checks what the client asks for).
func attachConn(t *testing.T, opts ...Option) *conn {
	t.Helper()
	s := New(append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
	s.Register(&Service{Name: "Echo", Methods: []Method{{Name: "echo",
		NewArgs: func() proto.Struct { return nil },
		Handle:  func(context.Context, proto.Struct) (proto.Struct, error) { return nil, nil }}}})
	return &conn{s: s, remote: "127.0.0.1:40000"}
}

func attachHello(fn string, size int64) *wire.Hello {
	return &wire.Hello{Attach: &wire.Attach{Transport: "shm", Function: fn, RequestSize: size, ResponseSize: size}}
}

// TestGrantLaneAdmission: an attach is checked against the registered
// functions and the budgets before the server sets anything up, and what a
// lane holds comes back when it ends.
func TestGrantLaneAdmission(t *testing.T) {
	t.Run("unknown function refused", func(t *testing.T) {
		c := attachConn(t)
		for _, fn := range []string{"", "Echo:nope", "Nope:echo"} {
			l, exc := c.grantLane(attachHello(fn, 0), wire.CapSHM)
			require.Nil(t, l)
			require.NotNil(t, exc)
			assert.Equal(t, proto.ExcUnknownMethod, exc.Type)
			assert.Equal(t, `hatrpc: no lane for "`+fn+`": no such function`, exc.Message)
		}
	})
	t.Run("sizes capped by the message limit", func(t *testing.T) {
		c := attachConn(t)
		l, exc := c.grantLane(attachHello("Echo:echo", 1<<62), wire.CapSHM)
		require.Nil(t, exc)
		defer l.grant.release()
		// bufferFor caps each registered buffer at 4 MiB whatever is asked.
		assert.LessOrEqual(t, l.side.Config.DirectSize, 4<<20)
		assert.LessOrEqual(t, l.side.Config.RespSize, 4<<20)
		assert.LessOrEqual(t, l.grant.bytes, int64(16<<20))
	})
	t.Run("pending setups bounded, released when the lane ends", func(t *testing.T) {
		c := attachConn(t, WithLaneLimits(LaneLimits{Pending: 2}))
		a, exc := c.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
		require.Nil(t, exc)
		b, exc := c.grantLane(attachHello(fastpath.FlockFunction, 0), wire.CapSHM)
		require.Nil(t, exc)
		_, exc = c.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
		require.NotNil(t, exc)
		assert.Equal(t, proto.ExcUnsupportedClientType, exc.Type)
		assert.Equal(t, "hatrpc: server: fast-path budget exhausted: 2 lane setups pending", exc.Message)
		a.grant.ready() // bootstrapped: no longer pending
		d, exc := c.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
		require.Nil(t, exc)
		for _, l := range []*lane{a, b, d} {
			l.grant.release()
			l.grant.release() // twice is harmless
		}
		assert.Zero(t, c.s.laneBudget.total.pending)
		assert.Zero(t, c.s.laneBudget.total.lanes)
		assert.Zero(t, c.s.laneBudget.total.bytes)
		assert.Zero(t, c.s.laneBudget.total.flockPeers)
	})
	t.Run("lanes, bytes and flock peers bounded", func(t *testing.T) {
		tests := []struct {
			name string
			lim  LaneLimits
			fn   string
			want string
		}{
			{"lanes", LaneLimits{Lanes: 1}, "Echo:echo", "hatrpc: server: fast-path budget exhausted: 1 lanes open"},
			{"bytes", LaneLimits{Bytes: 1}, "Echo:echo", "hatrpc: server: fast-path budget exhausted: lanes hold 0 MiB of registered memory"},
			{"flock", LaneLimits{FlockPeers: 1}, fastpath.FlockFunction, "hatrpc: server: fast-path budget exhausted: 1 qp_sharing clients attached"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				c := attachConn(t, WithLaneLimits(tc.lim))
				var held []*lane
				if tc.name != "bytes" {
					l, exc := c.grantLane(attachHello(tc.fn, 0), wire.CapSHM)
					require.Nil(t, exc)
					l.grant.ready()
					held = append(held, l)
				}
				_, exc := c.grantLane(attachHello(tc.fn, 0), wire.CapSHM)
				require.NotNil(t, exc)
				assert.Equal(t, tc.want, exc.Message)
				for _, l := range held {
					l.grant.release()
				}
				if tc.name != "bytes" {
					l, exc := c.grantLane(attachHello(tc.fn, 0), wire.CapSHM)
					require.Nil(t, exc, "budget not returned")
					l.grant.release()
				}
			})
		}
	})
	t.Run("one remote host gets a quarter", func(t *testing.T) {
		c := attachConn(t, WithLaneLimits(LaneLimits{Lanes: 8}))
		c.remote = "192.0.2.7:5000"
		var held []*lane
		for i := 0; i < 2; i++ {
			l, exc := c.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
			require.Nil(t, exc)
			held = append(held, l)
		}
		_, exc := c.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
		require.NotNil(t, exc)
		assert.Equal(t, "hatrpc: server: fast-path budget exhausted: host 192.0.2.7: 2 lanes open", exc.Message)
		other := &conn{s: c.s, remote: "192.0.2.8:5000"}
		l, exc := other.grantLane(attachHello("Echo:echo", 0), wire.CapSHM)
		require.Nil(t, exc, "another host is not held back")
		held = append(held, l)
		for _, l := range held {
			l.grant.release()
		}
		assert.Empty(t, c.s.laneBudget.hosts)
		assert.Zero(t, c.s.laneBudget.total)
	})
}
