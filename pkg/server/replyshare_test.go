package server_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// unreadCalls writes calls to nc from a goroutine (the server stops
// reading, so the writes block) and returns a function that closes nc
// and waits for the writer. The client's receive buffer is left alone:
// shrinking it after the handshake (SO_RCVBUF 4096) made loopback TCP
// prune and drop segments, and the connection stalled both ways with
// 121 calls read, a stall the server cannot see (2 runs in 3 here).
func unreadCalls(t *testing.T, nc net.Conn, calls []byte) (closeConn func()) {
	t.Helper()
	require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(2*time.Minute))))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = nc.Write(calls) // fails once the test closes nc
	}()
	return func() {
		_ = nc.Close()
		<-done
	}
}

// unreadFill is how many calls with replies of size bytes fill more than
// the kernel can buffer on a loopback connection nobody reads: the
// server's send buffer grows to tcp_wmem's maximum; the client's receive
// buffer is counted at its maximum, though it grows only as it is read.
func unreadFill(t *testing.T, size int) int {
	t.Helper()
	kernel := 0
	for _, f := range []string{"/proc/sys/net/ipv4/tcp_wmem", "/proc/sys/net/ipv4/tcp_rmem"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		fs := strings.Fields(string(b))
		require.Len(t, fs, 3, f)
		n, err := strconv.Atoi(fs[2])
		require.NoError(t, err, f)
		kernel += n
	}
	return 2 * (kernel + 4<<20) / size
}

// hatCalls is n pipelined HatRPC call frames of method with args.
func hatCalls(t *testing.T, n int, method string, args proto.Struct) []byte {
	t.Helper()
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	var b []byte
	for seq := int32(1); seq <= int32(n); seq++ {
		start := len(b)
		b = append(b, make([]byte, wire.HeaderSize)...)
		var err error
		b, err = codec.AppendMessage(b, proto.Binary, method, proto.Call, seq, args)
		require.NoError(t, err)
		wire.SealFrame(b[start:], wire.KindCall, 0, seq, 0)
	}
	return b
}

// framedCalls is n pipelined plain framed Thrift calls of method with args.
func framedCalls(t *testing.T, n int, method string, args proto.Struct) []byte {
	t.Helper()
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	var b []byte
	for seq := int32(1); seq <= int32(n); seq++ {
		start := len(b)
		b = append(b, 0, 0, 0, 0)
		var err error
		b, err = codec.AppendMessage(b, proto.Binary, method, proto.Call, seq, args)
		require.NoError(t, err)
		l := len(b) - start - 4
		b[start], b[start+1], b[start+2], b[start+3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
	}
	return b
}

// Cold calls (the method's reply size is not known yet) reserve nothing,
// and on a HatRPC connection 4 of them run at once: their replies, each
// most of the connection's share, are admitted against the share one by
// one as the client does not read, so the budget never holds more than
// the share (before, each built reply was charged whether it fit or
// not, or on a HatRPC connection not at all). On a plain connection the
// replies are admitted in their order. Either way the reader stops: most
// calls never start.
func TestColdUnreadRepliesHeldToShare(t *testing.T) {
	const perConn = 4 << 20
	reply := strings.Repeat("c", 3<<20) // most of the share
	for _, tc := range []struct {
		name  string
		calls func(*testing.T, int, string, proto.Struct) []byte
		dial  func(*testing.T, string) net.Conn
		gate  bool // hold the handlers until 4 run (HatRPC calls run concurrently)
	}{
		{"hatrpc", hatCalls, func(t *testing.T, addr string) net.Conn { nc, _ := rawHat(t, addr); return nc }, true},
		{"plain-framed", framedCalls, func(t *testing.T, addr string) net.Conn {
			nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(5*time.Second))
			require.NoError(t, err)
			return nc
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var started atomic.Int32
			release := make(chan struct{})
			svc := &server.Service{Name: "Big", Methods: []server.Method{{
				Name: "big", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
				Handle: func(ctx context.Context, _ proto.Struct) (proto.Struct, error) {
					started.Add(1)
					if tc.gate {
						select {
						case <-release:
						case <-ctx.Done():
							return nil, ctx.Err()
						}
					}
					return &wiretest.EchoResult{Success: &reply}, nil
				},
			}}}
			s := server.New(server.WithLogger(quiet), server.WithMemoryBudget(4*perConn, perConn))
			s.Register(svc)
			addr := serveOn(t, s)

			const calls = 32
			closeConn := unreadCalls(t, tc.dial(t, addr), tc.calls(t, calls, "big", &wiretest.EchoArgs{Msg: "x"}))
			defer closeConn()
			if tc.gate {
				require.Eventually(t, func() bool { return started.Load() >= 4 }, eventually, time.Millisecond)
				close(release) // the four cold replies are built at once
			}
			// The replies the kernel cannot take are held at the share:
			// one is charged (written, or waiting in the write) ...
			var peak int64
			require.Eventually(t, func() bool {
				used := server.BudgetUsed(s)
				peak = max(peak, used)
				require.LessOrEqual(t, used, int64(perConn), "the budget holds more than one connection's share")
				return used >= int64(len(reply))
			}, eventually, time.Millisecond, "an unread reply is charged")
			// ... and for as long as the client does not read, no more
			// than the share is, and the reader stays stopped.
			for range 200 {
				used := server.BudgetUsed(s)
				peak = max(peak, used)
				require.LessOrEqual(t, used, int64(perConn), "the budget holds more than one connection's share")
				time.Sleep(time.Millisecond)
			}
			t.Logf("peak budget %d bytes, %d calls started of %d", peak, started.Load(), calls)
			require.Less(t, started.Load(), int32(calls), "the unread connection stopped being read")

			closeConn()
			require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, eventually, 10*time.Millisecond)
		})
	}
}

// Small replies (under 64 KiB) are charged too: a client pipelining
// 20,000 calls with 1 KB replies and reading none fills its share with
// them and is not read further (before, they were not charged at all,
// and a connection could hold one per call slot: 4,096 × 64 KiB).
func TestSmallUnreadRepliesHeldToShare(t *testing.T) {
	const perConn = 1 << 20
	s, _, addr := start(t, server.WithMemoryBudget(4*perConn, perConn))
	nc, _ := rawHat(t, addr)
	calls := unreadFill(t, 1000) // more replies than the kernel's socket buffers hold
	closeConn := unreadCalls(t, nc, hatCalls(t, calls, "echo", &wiretest.EchoArgs{Msg: strings.Repeat("s", 1000)}))
	defer closeConn()

	var peak int64
	require.Eventually(t, func() bool {
		used := server.BudgetUsed(s)
		peak = max(peak, used)
		require.LessOrEqual(t, used, int64(perConn), "the budget holds more than one connection's share")
		return used >= perConn/2
	}, eventually, time.Millisecond, "unread small replies are charged")
	for range 200 {
		used := server.BudgetUsed(s)
		peak = max(peak, used)
		require.LessOrEqual(t, used, int64(perConn), "the budget holds more than one connection's share")
		time.Sleep(time.Millisecond)
	}
	started := startedCalls(t, s)
	t.Logf("peak budget %d bytes, %v calls started of %d", peak, started, calls)
	require.Less(t, started, float64(calls), "the unread connection stopped being read")

	closeConn()
	require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, eventually, 10*time.Millisecond)
}

// A reply larger than the connection's share could never be admitted:
// the call gets an exception naming its size and the share instead, as
// a request larger than the share is refused, and the connection goes on.
func TestReplyOverShareRefused(t *testing.T) {
	const perConn = 1 << 20
	_, _, addr := start(t, server.WithMemoryBudget(4*perConn, perConn))
	big := &wiretest.EchoArgs{Msg: strings.Repeat("b", 2000), Mode: wiretest.ModeRepeat} // a 2 MB reply
	want := `^hatrpc: reply of 20[0-9]{5} bytes exceeds the connection's memory share of 1048576 bytes \(WithMemoryBudget\)$`
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()

	t.Run("hatrpc", func(t *testing.T) {
		c := dial(t, addr)
		var res wiretest.EchoResult
		err := c.Call(ctx, wiretest.EchoMethod, big, &res)
		var ae *proto.ApplicationException
		require.ErrorAs(t, err, &ae)
		require.Equal(t, proto.ExcInternalError, ae.Type)
		require.Regexp(t, want, ae.Message)
		require.NoError(t, c.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "after"}, &res))
		require.Equal(t, "after", *res.Success)
	})
	t.Run("plain-framed", func(t *testing.T) {
		nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(5*time.Second))
		require.NoError(t, err)
		defer nc.Close()
		require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(time.Minute))))
		_, err = nc.Write(framedCalls(t, 1, "echo", big))
		require.NoError(t, err)
		msg, err := wire.ReadMessage(bufio.NewReader(nc), wire.Format{Proto: proto.Binary, Framed: true}, nil, nil)
		require.NoError(t, err)
		mh, err := wire.ParseMsgHeader(proto.Binary, msg)
		require.NoError(t, err)
		require.Equal(t, proto.Exception, mh.Type)
		var ae proto.ApplicationException
		require.NoError(t, ae.DecodeBinary(proto.NewBinaryReader(msg[mh.Body:], nil)))
		require.Regexp(t, want, ae.Message)
	})
}
