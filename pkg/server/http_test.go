package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// mountHTTP serves s's HTTPHandler at /thrift of an httptest server's mux
// and returns its URL.
func mountHTTP(t testing.TB, s *server.Server) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/thrift", s.HTTPHandler())
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/thrift"
}

// message encodes one unframed Thrift message.
func message(t testing.TB, p proto.Protocol, name string, typ proto.MessageType, seq int32, body proto.Struct) []byte {
	t.Helper()
	c := wire.GetCodec()
	defer wire.PutCodec(c)
	b, err := c.AppendMessage(nil, p, name, typ, seq, body)
	require.NoError(t, err)
	return b
}

func post(t testing.TB, url string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(tctx(t), http.MethodPost, url, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", server.ContentTypeThrift)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// Apache's Go THttpClient calls the handler mounted in a mux and the
// server's own port, binary and compact, calls and oneway calls, with an
// unknown method answered as an exception.
func TestHTTPApacheClient(t *testing.T) {
	s, e, addr := start(t)
	urls := map[string]string{"mux": mountHTTP(t, s), "port": "http://" + addr + "/"}
	for where, url := range urls {
		for _, compact := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/compact=%v", where, compact), func(t *testing.T) {
				ac, err := wiretest.DialApacheHTTP(url, compact, nil)
				require.NoError(t, err)
				defer ac.HTTP.Close()
				for i := range 3 {
					msg := fmt.Sprintf("hi %d", i)
					got, err := ac.Echo(tctx(t), msg)
					require.NoError(t, err)
					require.Equal(t, msg, got)
				}
				require.NoError(t, ac.Fire(tctx(t), "fired"))
				require.Equal(t, "fired", recvT(t, e.Fired))
				var res wiretest.ApacheEchoResult
				_, err = ac.Client.Call(tctx(t), "missing", &wiretest.ApacheEchoArgs{}, &res)
				var ae thrift.TApplicationException
				require.ErrorAs(t, err, &ae)
				require.Equal(t, int32(thrift.UNKNOWN_METHOD), ae.TypeId())
			})
		}
	}
}

func recvT[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testenv.HangGuard(time.Minute)):
		t.Fatal("timed out")
	}
	panic("unreachable")
}

// Request headers reach handlers through pkg/metadata (lower-case keys,
// without the connection's own), and their reply headers come back as
// response headers; Apache's client sends its own with SetHeader.
func TestHTTPHeaders(t *testing.T) {
	seen := make(chan metadata.MD, 4)
	s, _, addr := start(t, server.WithInterceptors(func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if !metadata.SetReply(ctx, "x-served-by", "hat", "Content-Length", "1", "bad\nname", "v") {
			md = nil // the test fails on the missing headers
		}
		seen <- md
		return next(ctx, args)
	}))
	for _, url := range []string{mountHTTP(t, s), "http://" + addr + "/"} {
		ac, err := wiretest.DialApacheHTTP(url, false, nil)
		require.NoError(t, err)
		ac.HTTP.SetHeader("Tenant", "t1")
		ac.HTTP.SetHeader(metadata.RequestIDKey, "rid-1")
		_, err = ac.Echo(tctx(t), "x")
		require.NoError(t, err)
		md := recvT(t, seen)
		require.Equal(t, "t1", md["tenant"])
		require.Equal(t, "rid-1", md[metadata.RequestIDKey])
		require.Equal(t, server.ContentTypeThrift, md["content-type"])
		require.NotContains(t, md, "content-length")

		resp, _ := post(t, url, bytes.NewReader(message(t, proto.Binary, "echo", proto.Call, 7, &wiretest.EchoArgs{Msg: "y"})))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "hat", resp.Header.Get("X-Served-By"))
		require.Equal(t, server.ContentTypeThrift, resp.Header.Get("Content-Type"))
		recvT(t, seen)
		require.NoError(t, ac.HTTP.Close())
	}
}

// One body may hold several messages, framed or not: the replies come
// back in order in one response.
func TestHTTPManyMessages(t *testing.T) {
	s, _, _ := start(t)
	url := mountHTTP(t, s)
	for _, framed := range []bool{false, true} {
		var body []byte
		for i := range 3 {
			m := message(t, proto.Compact, "echo", proto.Call, int32(i+1), &wiretest.EchoArgs{Msg: fmt.Sprint(i)})
			if framed {
				body = append(body, byte(len(m)>>24), byte(len(m)>>16), byte(len(m)>>8), byte(len(m)))
			}
			body = append(body, m...)
		}
		resp, out := post(t, url, bytes.NewReader(body))
		require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
		c := wire.GetCodec()
		br := bufio.NewReader(bytes.NewReader(out))
		for i := range 3 {
			m, err := wire.ReadMessage(br, wire.Format{Proto: proto.Compact, Framed: framed}, nil, nil)
			require.NoError(t, err)
			mh, err := wire.ParseMsgHeader(proto.Compact, m)
			require.NoError(t, err)
			require.Equal(t, int32(i+1), mh.Seqid)
			require.Equal(t, proto.Reply, mh.Type)
			var res wiretest.EchoResult
			require.NoError(t, c.Decode(proto.Compact, m[mh.Body:], &proto.DefaultLimits, &res))
			require.Equal(t, fmt.Sprint(i), *res.Success)
		}
		wire.PutCodec(c)
		require.Zero(t, br.Buffered())
	}
}

// Everything but a well-formed POST gets a clear HTTP error.
func TestHTTPErrors(t *testing.T) {
	lim := proto.DefaultLimits
	lim.MaxMessageSize = wire.MinMessageSize
	s, _, addr := start(t, server.WithLimits(lim))
	big := message(t, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: strings.Repeat("x", 2*wire.MinMessageSize)})
	for _, url := range []string{mountHTTP(t, s), "http://" + addr + "/"} {
		cases := []struct {
			name   string
			do     func() (*http.Response, []byte)
			status int
			text   string
		}{
			{"get", func() (*http.Response, []byte) {
				resp, err := http.Get(url)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp, b
			}, http.StatusMethodNotAllowed, "hatrpc: Thrift over HTTP takes POST requests"},
			{"too large", func() (*http.Response, []byte) { return post(t, url, bytes.NewReader(big)) },
				http.StatusRequestEntityTooLarge, "hatrpc: request body larger than 4100 bytes (the message size limit)"},
			{"too large chunked", func() (*http.Response, []byte) {
				return post(t, url, io.MultiReader(bytes.NewReader(big), strings.NewReader(""))) // unknown length: chunked
			}, http.StatusRequestEntityTooLarge, "hatrpc: request body larger than 4100 bytes (the message size limit)"},
			{"garbage", func() (*http.Response, []byte) { return post(t, url, strings.NewReader("hello, world")) },
				http.StatusBadRequest, "hatrpc: bad Thrift request: wire: not a thrift stream: proto: invalid data"},
			{"empty", func() (*http.Response, []byte) { return post(t, url, http.NoBody) },
				http.StatusBadRequest, "hatrpc: empty request body: want Thrift messages"},
			{"truncated", func() (*http.Response, []byte) {
				m := message(t, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "x"})
				return post(t, url, bytes.NewReader(m[:len(m)-3]))
			}, http.StatusBadRequest, "hatrpc: bad Thrift request: unexpected EOF"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp, body := tc.do()
				require.Equal(t, tc.status, resp.StatusCode)
				require.Equal(t, tc.text, strings.TrimSpace(string(body)))
			})
		}
	}
}

// A body that never ends is cut by the time limits: one that sends
// nothing by the handshake timeout, one that stops mid-message by the
// slow-read limit, and one that stops between messages too.
func TestHTTPBodyNeverEnds(t *testing.T) {
	s, _, addr := start(t, server.WithHandshakeTimeout(300*time.Millisecond),
		server.WithMinReadRate(300*time.Millisecond, 1))
	m := message(t, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "x"})
	for _, url := range []string{mountHTTP(t, s), "http://" + addr + "/"} {
		for _, prefix := range [][]byte{nil, m[:5], m} {
			pr, pw := io.Pipe()
			go func() { _, _ = pw.Write(prefix) }() // then nothing, until the test ends
			resp, body := post(t, url, pr)
			require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
			require.Contains(t, string(body), "hatrpc: request body arrived too slowly")
			pw.Close()
		}
	}
}

// A HatRPC handshake over HTTP is answered without capabilities: calls
// over HTTP stay plain Thrift.
func TestHTTPNoUpgrade(t *testing.T) {
	s, _, _ := start(t)
	url := mountHTTP(t, s)
	hello := &wire.Hello{Version: wire.Version, Caps: wire.CapFraming | wire.CapHeaders}
	resp, out := post(t, url, bytes.NewReader(message(t, proto.Binary, wire.HelloMethod, proto.Call, 0, hello)))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	mh, err := wire.ParseMsgHeader(proto.Binary, out)
	require.NoError(t, err)
	require.Equal(t, proto.Reply, mh.Type)
	var rep wire.HelloReply
	c := wire.GetCodec()
	defer wire.PutCodec(c)
	require.NoError(t, c.Decode(proto.Binary, out[mh.Body:], &proto.DefaultLimits, &rep))
	require.Zero(t, rep.Caps)
}

// After Close the handler answers 503.
func TestHTTPAfterClose(t *testing.T) {
	s := server.New(server.WithLogger(quiet))
	s.Register(wiretest.NewEcho().Service())
	url := mountHTTP(t, s)
	require.NoError(t, s.Close())
	resp, body := post(t, url, bytes.NewReader(message(t, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "x"})))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "hatrpc: server shutting down", strings.TrimSpace(string(body)))
}

// A TCP client dialling the port keeps working next to HTTP ones.
func TestHTTPPortStillThrift(t *testing.T) {
	_, _, addr := start(t)
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"))
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(testenv.HangGuard(time.Minute))))
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	c := dial(t, addr)
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "tcp"})
	require.NoError(t, err)
	require.Equal(t, "tcp", got)
}

// Calls of a body still run after the body ended (the end of a body is
// not a client gone), and a Shutdown waits for them and closes idle
// keep-alive connections on the port.
func TestHTTPBodyEndKeepsCalls(t *testing.T) {
	s, _, addr := start(t)
	slow := message(t, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "slow", DelayNs: int64(200 * time.Millisecond)})
	for _, url := range []string{mountHTTP(t, s), "http://" + addr + "/"} {
		resp, out := post(t, url, bytes.NewReader(slow))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		mh, err := wire.ParseMsgHeader(proto.Binary, out)
		require.NoError(t, err)
		require.Equal(t, proto.Reply, mh.Type)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	require.NoError(t, s.Shutdown(ctx)) // the port's keep-alive connection is closed
}

// A message the memory budget can never hold gets 413; one whose start
// names a call but whose body does not decode is answered with the
// call's PROTOCOL_ERROR exception, after the replies before it.
func TestHTTPBadMessages(t *testing.T) {
	s, _, _ := start(t, server.WithMemoryBudget(1<<20, 256<<10))
	url := mountHTTP(t, s)
	big := message(t, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "x", Blob: make([]byte, 300<<10)})
	framed := append([]byte{0, 0, 0, 0}, big...)
	n := len(big)
	framed[0], framed[1], framed[2], framed[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	resp, body := post(t, url, bytes.NewReader(framed))
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(body))

	good := message(t, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "ok"})
	bad := message(t, proto.Binary, "echo", proto.Call, 2, &wiretest.EchoArgs{Msg: "x"})
	bad = append(bad[:len(bad)-1], 0x77, 0, 1, 0) // a field type that does not exist instead of STOP
	resp, out := post(t, url, bytes.NewReader(append(good, bad...)))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	br := bufio.NewReader(bytes.NewReader(out))
	c := wire.GetCodec()
	defer wire.PutCodec(c)
	for _, want := range []proto.MessageType{proto.Reply, proto.Exception} {
		m, err := wire.ReadMessage(br, wire.Format{Proto: proto.Binary}, nil, nil)
		require.NoError(t, err)
		mh, err := wire.ParseMsgHeader(proto.Binary, m)
		require.NoError(t, err)
		require.Equal(t, want, mh.Type)
		if want == proto.Exception {
			var ae proto.ApplicationException
			require.NoError(t, c.Decode(proto.Binary, m[mh.Body:], &proto.DefaultLimits, &ae))
			require.Equal(t, proto.ExcProtocolError, ae.Type)
		}
	}
}

// Apache's THeader protocol over its THttpClient: the body is a THeader
// frame, answered in kind with the handler's reply headers inside it.
func TestHTTPApacheTHeader(t *testing.T) {
	seen := make(chan metadata.MD, 4)
	s, _, addr := start(t, server.WithInterceptors(func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		metadata.SetReply(ctx, "echo-tenant", md["tenant"])
		seen <- md
		return next(ctx, args)
	}))
	for _, url := range []string{mountHTTP(t, s), "http://" + addr + "/"} {
		for _, pid := range []thrift.THeaderProtocolID{thrift.THeaderProtocolBinary, thrift.THeaderProtocolCompact} {
			tr, err := thrift.NewTHttpClientWithOptions(url, thrift.THttpClientOptions{Client: &http.Client{Timeout: testenv.HangGuard(time.Minute)}})
			require.NoError(t, err)
			p := thrift.NewTHeaderProtocolConf(tr, &thrift.TConfiguration{THeaderProtocolID: &pid})
			cl := thrift.NewTStandardClient(p, p)
			ctx := thrift.SetWriteHeaderList(thrift.SetHeader(tctx(t), "tenant", "t1"), []string{"tenant"})
			var res wiretest.ApacheEchoResult
			meta, err := cl.Call(ctx, "echo", &wiretest.ApacheEchoArgs{Msg: "th"}, &res)
			require.NoError(t, err)
			require.Equal(t, "th", *res.Success)
			require.Equal(t, "t1", recvT(t, seen)["tenant"])
			require.Equal(t, "t1", meta.Headers["echo-tenant"])
			require.NoError(t, tr.Close())
		}
	}
}

// A team mounts the server's services in its own mux; Apache's
// THttpClient (or an http:// HatRPC Conn) posts to /thrift.
func ExampleServer_HTTPHandler() {
	srv := server.New()
	srv.Register(wiretest.NewEcho().Service()) // the generated RegisterX(srv, handler)
	mux := http.NewServeMux()
	mux.Handle("/thrift", srv.HTTPHandler())
	_ = http.ListenAndServe("127.0.0.1:8080", mux)
}

// A reply over the message size limit is refused with an exception;
// replies that together outgrow a response (the message size limit) get
// 500, not unbounded memory.
func TestHTTPReplyLimit(t *testing.T) {
	lim := proto.DefaultLimits
	lim.MaxMessageSize = wire.MinMessageSize
	s := server.New(server.WithLogger(quiet), server.WithLimits(lim))
	big, mid := strings.Repeat("r", 2*wire.MinMessageSize), strings.Repeat("m", 2800)
	result := func(v *string) server.Handler {
		return func(context.Context, proto.Struct) (proto.Struct, error) {
			return &wiretest.EchoResult{Success: v}, nil
		}
	}
	s.Register(&server.Service{Name: "Big", Methods: []server.Method{
		{Name: "big", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) }, Handle: result(&big)},
		{Name: "mid", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) }, Handle: result(&mid)},
	}})
	serveOn(t, s)
	url := mountHTTP(t, s)

	resp, body := post(t, url, bytes.NewReader(message(t, proto.Binary, "big", proto.Call, 1, &wiretest.EchoArgs{})))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r := proto.NewBinaryReader(body, nil)
	_, typ, _, err := r.ReadMessageBegin()
	require.NoError(t, err)
	require.Equal(t, proto.Exception, typ)
	var ae proto.ApplicationException
	require.NoError(t, ae.DecodeBinary(r))
	require.Regexp(t, `^hatrpc: reply of 82[0-9]{2} bytes exceeds the message limit of 4096 bytes$`, ae.Message)

	two := append(message(t, proto.Binary, "mid", proto.Call, 1, &wiretest.EchoArgs{}),
		message(t, proto.Binary, "mid", proto.Call, 2, &wiretest.EchoArgs{})...)
	resp, body = post(t, url, bytes.NewReader(two))
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.Equal(t, "hatrpc: replies larger than the message size limit", strings.TrimSpace(string(body)))
}

// A handler mounted without Serve gets no error for a message limit below
// the protocol's minimum (Serve's ErrBadOption): it refuses every request
// with 500 naming the option, and logs it once.
func TestHTTPHandlerLimitFloor(t *testing.T) {
	var logs testutil.LogBuffer
	s := server.New(server.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		server.WithLimits(proto.Limits{MaxMessageSize: 64, MaxDepth: 16, MaxStringLength: 64, MaxContainerSize: 64}))
	e := wiretest.NewEcho()
	s.Register(e.Service())
	url := mountHTTP(t, s)
	want := "hatrpc: server: bad option: WithLimits: a message limit of 64 bytes is below the protocol's minimum of 4096 bytes (the hello, refusals and stream control frames must fit)\n"
	for range 3 {
		resp, body := post(t, url, bytes.NewReader(message(t, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "hi"})))
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		require.Equal(t, want, string(body))
	}
	require.Equal(t, 1, strings.Count(logs.String(), "hatrpc: HTTP handler refuses every request"), logs.String())
}
