package client_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// headerEcho is a server interceptor that reports every call's incoming
// headers and answers each with reply header "echo-<key>".
func headerEcho(seen chan<- metadata.MD) server.Interceptor {
	return func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		for k, v := range md {
			metadata.SetReply(ctx, "echo-"+k, v)
		}
		seen <- md
		return next(ctx, args)
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	return recvWithin(t, ch, 10*time.Second, "timed out")
}

// Apache's Go THeader client calls a HatRPC server: its headers reach the
// handler's context and the handler's reply headers reach it, in both
// protocols, compressed or not.
func TestTHeaderApacheClientToHatRPC(t *testing.T) {
	seen := make(chan metadata.MD, 16)
	ts := serve(t, "", server.WithInterceptors(headerEcho(seen)))
	cases := []struct {
		pid    thrift.THeaderProtocolID
		zlib   bool
		framed bool // inside Apache's TFramedTransport
	}{
		{thrift.THeaderProtocolBinary, false, false}, {thrift.THeaderProtocolCompact, false, false},
		{thrift.THeaderProtocolBinary, true, false}, {thrift.THeaderProtocolCompact, true, false},
		{thrift.THeaderProtocolBinary, false, true}, {thrift.THeaderProtocolCompact, false, true},
		{thrift.THeaderProtocolBinary, true, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("proto=%d/zlib=%v/framed=%v", tc.pid, tc.zlib, tc.framed), func(t *testing.T) {
			dialApache := wiretest.DialApacheTHeader
			if tc.framed {
				dialApache = wiretest.DialApacheFramedTHeader
			}
			ac, err := dialApache(ts.addr, tc.pid, tc.zlib)
			require.NoError(t, err)
			defer ac.Close()
			for i := range 3 { // several calls on one connection
				msg := fmt.Sprintf("hello %d", i)
				hdrs := map[string]string{"tenant": "t1", metadata.RequestIDKey: fmt.Sprintf("rid-%d", i)}
				got, rh, err := ac.Echo(tctx(t), msg, hdrs)
				require.NoError(t, err)
				require.Equal(t, msg, got)
				require.Equal(t, metadata.MD(hdrs), recv(t, seen))
				require.Equal(t, thrift.THeaderMap{"echo-tenant": "t1", "echo-" + metadata.RequestIDKey: fmt.Sprintf("rid-%d", i)}, rh)
			}
			// An unknown method is an exception in THeader, not a hang.
			var res wiretest.ApacheEchoResult
			_, err = ac.Client.Call(tctx(t), "missing", &wiretest.ApacheEchoArgs{}, &res)
			var ae thrift.TApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, int32(thrift.UNKNOWN_METHOD), ae.TypeId())
		})
	}
}

// A HatRPC client speaking THeader to Apache's Go THeader server: the
// Apache handler sees the outgoing headers and a generated request id,
// and the client captures the reply headers.
func TestTHeaderClientToApacheServer(t *testing.T) {
	seen := make(chan map[string]string, 16)
	proc := &wiretest.HeaderProcessor{TProcessor: &wiretest.ApacheProcessor{}, Seen: seen}
	as, err := wiretest.StartApacheTHeader(proc)
	require.NoError(t, err)
	defer func() { require.NoError(t, as.Stop()) }()
	// Apache's THeader over TFramedTransport (its server reads nothing else).
	fas, err := wiretest.StartApacheFramedTHeader(proc)
	require.NoError(t, err)
	defer func() { require.NoError(t, fas.Stop()) }()
	cases := []struct {
		name string
		addr string
		opts []client.Option
		rid  string // request id set by the caller; "" = generated
	}{
		{"binary", as.Addr, []client.Option{client.WithTHeader()}, ""},
		{"compact", as.Addr, []client.Option{client.WithTHeader(), client.WithCompact()}, "caller-id"},
		{"framed-binary", fas.Addr, []client.Option{client.WithFramedTHeader()}, ""},
		{"framed-compact", fas.Addr, []client.Option{client.WithFramedTHeader(), client.WithCompact()}, "caller-id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, tc.addr, tc.opts...)
			require.False(t, c.Upgraded())
			ctx := metadata.AppendToOutgoingContext(tctx(t), "tenant", "t2")
			if tc.rid != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, metadata.RequestIDKey, tc.rid)
			}
			var reply metadata.MD
			got, err := echo(metadata.CaptureReply(ctx, &reply), c, &wiretest.EchoArgs{Msg: "to apache"})
			require.NoError(t, err)
			require.Equal(t, "to apache", got)
			in := recv(t, seen)
			require.Equal(t, "t2", in["tenant"])
			rid := in[metadata.RequestIDKey]
			if tc.rid != "" {
				require.Equal(t, tc.rid, rid)
			} else {
				require.Regexp(t, "^[0-9a-f]{16}$", rid)
			}
			require.Equal(t, metadata.MD{"echo-tenant": "t2", "echo-" + metadata.RequestIDKey: rid}, reply)
			require.NoError(t, c.Close())
		})
	}
}

// Between HatRPC peers headers travel on the upgraded TCP connection
// (and on THeader when the client asks for it); the request id is
// generated unless the caller set one or turned ids off.
func TestHeadersHatRPC(t *testing.T) {
	seen := make(chan metadata.MD, 16)
	ts := serve(t, "", server.WithInterceptors(headerEcho(seen)))
	cases := []struct {
		name     string
		opts     []client.Option
		upgraded bool
		md       metadata.MD
		wantRID  bool
	}{
		{"tcp", []client.Option{client.WithRDMA("off")}, true, metadata.MD{"k": "v"}, true},
		{"tcp-compact", []client.Option{client.WithRDMA("off"), client.WithCompact()}, true, metadata.MD{"k": "c"}, true},
		{"tcp-no-headers", []client.Option{client.WithRDMA("off")}, true, nil, true},
		{"tcp-no-ids", []client.Option{client.WithRDMA("off"), client.WithoutRequestIDs()}, true, metadata.MD{"k": "v"}, false},
		{"theader", []client.Option{client.WithTHeader()}, false, metadata.MD{"k": "v", metadata.RequestIDKey: "mine"}, false},
		{"theader-compact", []client.Option{client.WithTHeader(), client.WithCompact()}, false, metadata.MD{"k": "w"}, true},
		{"framed-theader", []client.Option{client.WithFramedTHeader()}, false, metadata.MD{"k": "f"}, true},
		{"framed-theader-compact", []client.Option{client.WithFramedTHeader(), client.WithCompact()}, false, metadata.MD{"k": "g"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts.addr, tc.opts...)
			require.Equal(t, tc.upgraded, c.Upgraded())
			ctx := tctx(t)
			if tc.md != nil {
				ctx = metadata.NewOutgoingContext(ctx, tc.md)
			}
			var reply metadata.MD
			got, err := echo(metadata.CaptureReply(ctx, &reply), c, &wiretest.EchoArgs{Msg: "x"})
			require.NoError(t, err)
			require.Equal(t, "x", got)
			in := recv(t, seen)
			want := metadata.MD{}
			for k, v := range tc.md {
				want[k] = v
			}
			if tc.wantRID {
				require.Regexp(t, "^[0-9a-f]{16}$", in[metadata.RequestIDKey])
				want[metadata.RequestIDKey] = in[metadata.RequestIDKey]
			}
			if len(want) == 0 {
				require.Empty(t, in)
				require.Nil(t, reply)
				return
			}
			require.Equal(t, want, in)
			wantReply := metadata.MD{}
			for k, v := range want {
				wantReply["echo-"+k] = v
			}
			require.Equal(t, wantReply, reply)
		})
	}
}

// A hostile or unsupported THeader frame gets an exception or a closed
// connection, never a hang, and allocates nothing near what it claims.
func TestTHeaderBadInput(t *testing.T) {
	head := func(words uint16, header ...byte) []byte {
		b := []byte{0x0f, 0xff, 0, 0, 0, 0, 0, 9, byte(words >> 8), byte(words)}
		return append(b, header...)
	}
	frame := func(p []byte) []byte {
		n := len(p)
		return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, p...)
	}
	// 4 MiB of zeros compress to a few KiB: inflated, they would pass
	// the budget below.
	bomb := frame(wire.CompressTHeader(append(head(1, 0, 1, 1, 0), make([]byte, 4<<20)...), 14))
	budget := []server.Option{server.WithMemoryBudget(2<<20, 1<<20)}
	cases := []struct {
		name  string
		in    []byte
		opts  []server.Option
		reply bool   // an exception comes back before the close
		text  string // in the exception
	}{
		{"snappy transform", frame(append(head(1, 0, 1, 3, 0), 0x80, 1, 0, 1)), nil, true, "wire: unsupported THeader transform 3 (only zlib, 1, is)"},
		{"protocol id 7", frame(head(1, 7, 0, 0, 0)), nil, true, "wire: bad THeader: proto: invalid data: protocol id 7"},
		{"header beyond frame", frame(head(0xffff)), nil, true, "wire: bad THeader: proto: invalid data: header of 262140 bytes in a frame of 10"},
		{"zlib bomb over the budget", bomb, budget, true, "inflated THeader payload over 1048576 bytes"},
		{"frame of 2 GiB", []byte{0x7f, 0xff, 0xff, 0xf0, 0x0f, 0xff, 0, 0}, nil, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := serve(t, "", tc.opts...)
			nc, err := net.DialTimeout("tcp", ts.addr, testenv.HangGuard(5*time.Second))
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(10*time.Second))))
			_, err = nc.Write(tc.in)
			require.NoError(t, err)
			buf := make([]byte, 4096)
			n, rerr := readAll(nc, buf)
			if !tc.reply {
				require.Zero(t, n, "%x", buf[:n])
				require.Error(t, rerr)
				return
			}
			require.Greater(t, n, 14, "%v", rerr)
			require.Equal(t, []byte{0x0f, 0xff}, buf[4:6])
			require.Equal(t, []byte{0, 0, 0, 9}, buf[8:12], "sequence id echoed")
			require.Contains(t, string(buf[:n]), tc.text)
		})
	}
}

// readAll reads until the peer closes (or the deadline), so a reply
// followed by a close is read whole.
func readAll(nc net.Conn, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := nc.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// syncBuf is a log sink safe for the server's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The server's log lines about a call name its request id.
func TestRequestIDInServerLog(t *testing.T) {
	var logs syncBuf
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ts := serve(t, "", server.WithLogger(log))
	cases := []struct {
		name string
		mode int32
		line string
	}{
		{"handler error", wiretest.ModePlain, `msg="hatrpc: handler error" method=echo`},
		{"handler panic", wiretest.ModePanic, `msg="hatrpc: handler panic" method=echo`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, opts := range [][]client.Option{{client.WithRDMA("off")}, {client.WithTHeader()}} {
				c := dial(t, ts.addr, opts...)
				rid := "rid-" + strings.ReplaceAll(tc.name, " ", "-") + fmt.Sprint(len(opts))
				ctx := metadata.AppendToOutgoingContext(tctx(t), metadata.RequestIDKey, rid)
				_, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "x", Mode: tc.mode})
				require.ErrorAs(t, err, new(*proto.ApplicationException))
				require.NoError(t, c.Close())
				require.Regexp(t, regexp.QuoteMeta(tc.line)+` remote=\S+ request_id=`+rid+" ", logs.String())
			}
		})
	}
}

// A compressed THeader request whose inflation the memory budget cannot
// hold within the busy timeout is answered "server busy" (to the right call: Apache's client
// checks the method name) and the connection goes on; once memory is
// free the same request succeeds.
func TestTHeaderInflateBusy(t *testing.T) {
	started := make(chan struct{}, 1)
	ic := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		if args.(*wiretest.EchoArgs).Mode == wiretest.ModeWaitCtx {
			started <- struct{}{}
		}
		return next(ctx, args)
	}
	// Without a busy timeout the request would wait for memory, as a
	// framed one does.
	ts := serve(t, "", server.WithMemoryBudget(2<<20, 2<<20), server.WithBusyTimeout(50*time.Millisecond), server.WithInterceptors(ic))

	// A HatRPC call holds 1.5 MiB of the budget until it is cancelled.
	holder := dial(t, ts.addr, client.WithRDMA("off"))
	hctx, cancel := context.WithCancel(tctx(t))
	held := make(chan error, 1)
	go func() {
		_, err := echo(hctx, holder, &wiretest.EchoArgs{Msg: "hold", Mode: wiretest.ModeWaitCtx, Blob: make([]byte, 3<<19)})
		held <- err
	}()
	recv(t, started)

	ac, err := wiretest.DialApacheTHeader(ts.addr, thrift.THeaderProtocolBinary, true)
	require.NoError(t, err)
	defer ac.Close()
	big := strings.Repeat("z", 1<<20) // compresses to a few KiB, inflates to 1 MiB
	_, _, err = ac.Echo(tctx(t), big, nil)
	var ae thrift.TApplicationException
	require.ErrorAs(t, err, &ae)
	require.Equal(t, int32(thrift.INTERNAL_ERROR), ae.TypeId())
	require.Equal(t, "server busy: request memory budget exhausted", ae.Error())

	cancel()
	require.ErrorIs(t, recv(t, held), context.Canceled)
	require.Equal(t, "hold", recv(t, ts.echo.Cancelled))
	// The same connection, once the handler's return gave the memory back
	// (just after it reported the cancellation: a few tries on an idle
	// host, more on a loaded one, so tries are bounded by a hang guard,
	// not counted).
	var got string
	for deadline := time.Now().Add(testenv.HangGuard(10 * time.Second)); time.Now().Before(deadline); {
		if got, _, err = ac.Echo(tctx(t), big, nil); err == nil {
			break
		}
		require.ErrorAs(t, err, &ae)
		require.Equal(t, int32(thrift.INTERNAL_ERROR), ae.TypeId())
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, err)
	require.Equal(t, big, got)
}
