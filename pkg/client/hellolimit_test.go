//go:build cgo && linux

package client_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// smallLimits is a message limit at the protocol's minimum.
var smallLimits = proto.Limits{MaxMessageSize: wire.MinMessageSize, MaxDepth: 16, MaxStringLength: 1 << 20, MaxContainerSize: 1 << 16}

// manyFunctions is the hint table of a service Echo with n functions that
// ask for a lane, then echo with the hints last.
func manyFunctions(n int, last hints.Set) *hints.Service {
	svc := &hints.Service{Name: "Echo"}
	for i := range n {
		svc.Functions = append(svc.Functions, hints.Function{Name: fmt.Sprintf("function%08d", i),
			Client: hints.Set{Transport: fastpathtest.HintTransport()}})
	}
	svc.Functions = append(svc.Functions, hints.Function{Name: "echo", Client: last})
	return svc
}

// A hello lists the client's plan for each function it has hints for, so
// a client of many functions sends one larger than a small message limit:
// it has a bound of its own (wire.MaxHelloSize). Before, the server
// refused it as too large, the client took the refusal for a plain Thrift
// server, and its calls went without HatRPC framing, plan checks or
// lanes. Past that bound the client sends the plans that fit and the
// server checks the others when their lane is attached.
func TestHelloPastSmallLimit(t *testing.T) {
	lane := fastpathtest.HintTransport()
	conflict := "function Echo:echo: the client asks for a " + fastpathtest.Transport() + " lane but the server pins the function to transport=tcp"
	cases := []struct {
		name      string
		functions int
		pinned    bool // the server pins echo to TCP: a lane for it conflicts
		dialErr   string
		callErr   string
	}{
		{"300-functions", 300, false, "", ""},
		{"300-functions-conflict", 300, true, conflict, ""},
		{"2000-functions-conflict-past-bound", 2000, true, "", conflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := wiretest.NewEcho()
			svc := e.Service()
			if tc.pinned {
				svc.Hints = &hints.Service{Name: "Echo", Functions: []hints.Function{{Name: "echo", Server: hints.Set{Transport: hints.TransportTCP}}}}
				svc.Methods[0].Hints = &svc.Hints.Functions[0]
			}
			s := server.New(server.WithLogger(quiet), server.WithRDMA(fastpathtest.Provider()), server.WithLimits(smallLimits))
			s.Register(svc)
			addr := serveWith(t, s)
			table := manyFunctions(tc.functions, hints.Set{Transport: lane})
			hello := wire.Hello{Plans: make([]wire.Attach, len(table.Functions))}
			for i, f := range table.Functions {
				hello.Plans[i] = wire.Attach{Function: "Echo:" + f.Name, ClientTransport: lane.String(), ClientProtocol: f.Client.Protocol.String()}
			}
			size := messageSizes(proto.Call, &hello, wire.HelloMethod)[0]
			t.Logf("%d functions: their plans alone take %d bytes", len(table.Functions), size)
			require.Greater(t, size, wire.MinMessageSize)

			var logs syncBuffer
			c, err := client.Dial(tctx(t), addr, client.WithLimits(smallLimits), client.WithHints(table),
				client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			checkHelloCutLog(t, logs.String(), len(table.Functions), tc.functions >= 2000)
			if tc.dialErr != "" {
				require.ErrorIs(t, err, client.ErrPlanConflict)
				require.EqualError(t, err, tc.dialErr)
				return
			}
			require.NoError(t, err)
			defer c.Close()
			var res wiretest.EchoResult
			err = c.Call(tctx(t), methodWith(hints.Set{Transport: lane}), &wiretest.EchoArgs{Msg: "hi"}, &res)
			if tc.callErr != "" {
				require.ErrorIs(t, err, client.ErrPlanConflict)
				require.EqualError(t, err, tc.callErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "hi", *res.Success)
			require.Equal(t, fastpathtest.Transport(), c.Plan("Echo:echo").Transport.String(), "the hello was answered: the call took a lane")
			require.Equal(t, 0.0, serverCounter(t, &testServer{srv: s}, "hatrpc_server_calls_total", map[string]string{"function": "echo", "transport": server.TransportThrift}))
		})
	}
}

// checkHelloCutLog: a Dial whose hello cannot hold every plan says so
// once, naming how many it holds and the first left for its call.
func checkHelloCutLog(t *testing.T, logs string, functions int, cut bool) {
	t.Helper()
	re := regexp.MustCompile(`msg="hatrpc: client: the handshake checks the plans of the first functions only; the others are checked at their first call on a lane" checked=(\d+) functions=(\d+) first_unchecked=(\S+) hello_bound_bytes=(\d+)`)
	m := re.FindAllStringSubmatch(logs, -1)
	if !cut {
		require.Empty(t, m, logs)
		return
	}
	require.Len(t, m, 1, logs)
	checked, err := strconv.Atoi(m[0][1])
	require.NoError(t, err)
	require.Greater(t, checked, 0)
	require.Less(t, checked, functions)
	require.Equal(t, strconv.Itoa(functions), m[0][2])
	require.Equal(t, fmt.Sprintf("Echo:function%08d", checked), m[0][3], "the first plan left out follows the last one sent")
	require.Equal(t, strconv.Itoa(wire.MaxHelloSize), m[0][4])
}

// Only a hello may be past the limit as a connection's first message: any
// other is refused as the limit refuses it later (a PROTOCOL_ERROR saying
// so, then the connection closes), framed or not; a hello that large is
// answered.
func TestFirstMessagePastLimit(t *testing.T) {
	ts := serve(t, "", server.WithLimits(smallLimits))
	big := &wiretest.EchoArgs{Msg: strings.Repeat("x", 5000)}
	hello := &wire.Hello{Version: wire.Version, Caps: wire.CapFraming, Host: strings.Repeat("h", 5000)}
	cases := []struct {
		name    string
		framed  bool
		method  string
		body    proto.Struct
		wantExc string // "" : a reply
	}{
		{"framed-call", true, "echo", big, "wire: frame too large: " + proto.ErrSizeLimit.Error() + ": frame of %d bytes"},
		{"unframed-call", false, "echo", big, "wire: frame too large: " + proto.ErrSizeLimit.Error() + ": message over 4096 bytes"},
		{"framed-hello", true, wire.HelloMethod, hello, ""},
		{"unframed-hello", false, wire.HelloMethod, hello, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", ts.addr)
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(10*time.Second))))
			codec := wire.GetCodec()
			defer wire.PutCodec(codec)
			var b []byte
			if tc.framed {
				b = make([]byte, 4)
			}
			b, err = codec.AppendMessage(b, proto.Binary, tc.method, proto.Call, 7, tc.body)
			require.NoError(t, err)
			n := len(b)
			if tc.framed {
				n -= 4
				b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
			}
			require.Greater(t, n, wire.MinMessageSize)
			_, err = nc.Write(b)
			require.NoError(t, err)
			br := bufio.NewReader(nc)
			format := wire.Format{Proto: proto.Binary, Framed: tc.framed}
			hl := wire.HelloLimits(&smallLimits)
			msg, err := wire.ReadMessage(br, format, nil, &hl)
			require.NoError(t, err)
			mh, err := wire.ParseMsgHeader(proto.Binary, msg)
			require.NoError(t, err)
			require.Equal(t, tc.method, string(mh.Name))
			require.Equal(t, int32(7), mh.Seqid)
			if tc.wantExc == "" {
				require.Equal(t, proto.Reply, mh.Type)
				var rep wire.HelloReply
				require.NoError(t, codec.Decode(proto.Binary, msg[mh.Body:], &hl, &rep))
				require.Equal(t, int32(wire.Version), rep.Version)
				require.NotZero(t, rep.Caps&wire.CapFraming)
				return
			}
			require.Equal(t, proto.Exception, mh.Type)
			var ae proto.ApplicationException
			require.NoError(t, codec.Decode(proto.Binary, msg[mh.Body:], nil, &ae))
			require.Equal(t, proto.ExcProtocolError, ae.Type)
			want := tc.wantExc
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, n)
			}
			require.Equal(t, want, ae.Message)
			_, err = br.ReadByte()
			require.Error(t, err, "the connection closes")
		})
	}
}

// A plain Thrift client (which checks the reply's method name) calling a
// method whose name leaves its refusal no room for text gets it without
// the text, or without the type too, within its limit: before, the
// refusal passed the limit and the client read a broken frame.
func TestRefusalPlainLongName(t *testing.T) {
	n := wire.MinMessageSize
	ts := serve(t, "", server.WithLimits(smallLimits))
	// The request: a framed binary call of no arguments, 4 + 12 + name + 1
	// bytes; its refusal without text takes 7 bytes more than that, and
	// without a type too, none.
	for _, tc := range []struct {
		name     string
		size     int // of the method's name
		wantType int32
	}{
		{"typed", n - 13 - 7, proto.ExcInternalError},
		{"bare", n - 13, proto.ExcUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.Repeat("m", tc.size)
			svc := &server.Service{Name: "Long" + tc.name, Methods: []server.Method{{Name: name, NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
				Handle: func(_ context.Context, _ proto.Struct) (proto.Struct, error) {
					return overLimitResult("result", n), nil
				}}}}
			ts.srv.Register(svc)
			c := dial(t, ts.addr, client.WithLimits(smallLimits), client.WithoutUpgrade())
			var res wiretest.EchoResult
			err := c.Call(tctx(t), &client.Method{Service: svc.Name, Name: name}, &wiretest.Empty{}, &res)
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.wantType, ae.Type)
			require.Equal(t, "", ae.Message)
			require.Equal(t, 1.0, serverCounter(t, ts, "hatrpc_server_calls_total", map[string]string{"function": name, "transport": server.TransportThrift}))
		})
	}
}
