package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// The HatRPC client over HTTP against Apache's Go NewThriftHandlerFunc,
// binary and compact, calls and oneway calls.
func TestHTTPClientToApache(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprintf("compact=%v", compact), func(t *testing.T) {
			proc := &wiretest.ApacheProcessor{Fired: make(chan string, 4)}
			ts := httptest.NewServer(wiretest.ApacheHTTPHandler(proc, compact))
			defer ts.Close()
			opts := []client.Option{}
			if compact {
				opts = append(opts, client.WithCompact())
			}
			c := dial(t, ts.URL, opts...)
			require.False(t, c.Upgraded())
			for i := range 3 {
				msg := fmt.Sprintf("m%d", i)
				got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: msg})
				require.NoError(t, err)
				require.Equal(t, msg, got)
			}
			require.NoError(t, c.Call(tctx(t), wiretest.FireMethod, &wiretest.EchoArgs{Msg: "fired"}, nil))
			require.Equal(t, "fired", recv(t, proc.Fired))
			err := c.Call(tctx(t), &client.Method{Name: "missing"}, &wiretest.EchoArgs{}, &wiretest.EchoResult{})
			require.ErrorIs(t, err, &proto.ApplicationException{Type: proto.ExcUnknownMethod})
		})
	}
}

// The HatRPC client over HTTP against a HatRPC server, on its own port
// and mounted in a mux: concurrent calls (one POST each over keep-alive
// connections), headers both ways, deadlines, declared exceptions.
func TestHTTPClientToHatRPC(t *testing.T) {
	seen := make(chan metadata.MD, 64)
	ts := serve(t, "", server.WithInterceptors(headerEcho(seen)))
	mux := http.NewServeMux()
	mux.Handle("/rpc", ts.srv.HTTPHandler())
	hs := httptest.NewServer(mux)
	defer hs.Close()
	for where, url := range map[string]string{"port": "http://" + ts.addr, "mux": hs.URL + "/rpc"} {
		t.Run(where, func(t *testing.T) {
			c := dial(t, url, client.WithHTTPHeader("Authorization", "Bearer t0k"), client.WithMultiplexed())
			errs := make(chan error, 32)
			for i := range 32 {
				go func() {
					msg := fmt.Sprintf("c%d", i)
					ctx := metadata.AppendToOutgoingContext(tctx(t), "tenant", "t1")
					var reply metadata.MD
					got, err := echo(metadata.CaptureReply(ctx, &reply), c, &wiretest.EchoArgs{Msg: msg})
					switch {
					case err != nil:
					case got != msg:
						err = fmt.Errorf("got %q want %q", got, msg)
					case reply["echo-tenant"] != "t1":
						err = fmt.Errorf("reply headers %v", reply)
					}
					errs <- err
				}()
			}
			for range 32 {
				require.NoError(t, recv(t, errs))
				md := recv(t, seen)
				require.Equal(t, "t1", md["tenant"])
				require.Equal(t, "Bearer t0k", md["authorization"])
				require.Regexp(t, "^[0-9a-f]{16}$", md[metadata.RequestIDKey])
			}

			var res wiretest.EchoResult
			require.NoError(t, c.Call(tctx(t), wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "d", Mode: wiretest.ModeDeclared}, &res))
			require.Equal(t, int32(42), res.Err.Code)
			recv(t, seen)

			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "slow", DelayNs: int64(time.Minute)})
			require.ErrorIs(t, err, context.DeadlineExceeded)
			recv(t, seen)

			require.NoError(t, c.Close())
			_, err = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "closed"})
			require.ErrorIs(t, err, client.ErrConnClosed)
		})
	}
}

// WithTHeader over HTTP: each body is one THeader frame, as Apache's
// THeaderProtocol over THttpClient sends it; the call's headers and
// request id travel in it and the reply's come back in it.
func TestHTTPClientTHeader(t *testing.T) {
	seen := make(chan metadata.MD, 8)
	ts := serve(t, "", server.WithInterceptors(headerEcho(seen)))
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		t.Run(p.String(), func(t *testing.T) {
			c := dial(t, "http://"+ts.addr, client.WithTHeader(), client.WithProtocol(p))
			ctx := metadata.AppendToOutgoingContext(tctx(t), "tenant", "t1")
			var reply metadata.MD
			got, err := echo(metadata.CaptureReply(ctx, &reply), c, &wiretest.EchoArgs{Msg: "over http"})
			require.NoError(t, err)
			require.Equal(t, "over http", got)
			md := recv(t, seen)
			require.Equal(t, "t1", md["tenant"])
			require.Regexp(t, "^[0-9a-f]{16}$", md[metadata.RequestIDKey])
			require.Equal(t, "t1", reply["echo-tenant"])
			var res wiretest.EchoResult
			require.NoError(t, c.Call(tctx(t), wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "d", Mode: wiretest.ModeDeclared}, &res))
			require.Equal(t, int32(42), res.Err.Code)
			recv(t, seen)
		})
	}
}

// https:// with WithTLS, against the server's own TLS port and an
// httptest TLS server mounting the handler.
func TestHTTPClientTLS(t *testing.T) {
	hs := httptest.NewUnstartedServer(http.NotFoundHandler())
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	hs.StartTLS()                                   // its certificate, for both servers
	defer hs.Close()
	cert := hs.TLS.Certificates[0]
	// A handshake under TCG on a loaded host took over the 10 s defaults:
	// both sides' handshake limits here only guard against a hang.
	guard := testenv.HangGuard(10 * time.Second)
	ts := serve(t, "", server.WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}}), server.WithHandshakeTimeout(guard))
	hs.Config.Handler = ts.srv.HTTPHandler()
	pool := x509.NewCertPool()
	pool.AddCert(hs.Certificate())
	_, port, err := net.SplitHostPort(ts.addr)
	require.NoError(t, err)
	for _, url := range []string{hs.URL, "https://127.0.0.1:" + port} {
		c := dial(t, url, client.WithTLS(&tls.Config{RootCAs: pool}), client.WithDialTimeout(guard))
		got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "tls"})
		require.NoError(t, err, url)
		require.Equal(t, "tls", got)

		c = dial(t, url, client.WithDialTimeout(guard)) // the system roots do not know the test certificate
		_, err = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "tls"})
		require.ErrorIs(t, err, client.ErrConnClosed)
		var ue x509.UnknownAuthorityError
		require.ErrorAs(t, err, &ue)
	}
}

// A server killed mid-call fails the call with ErrConnClosed; an answer
// that is not 200 is an *HTTPError saying so.
func TestHTTPClientFailures(t *testing.T) {
	arrived := make(chan struct{}, 1)
	ts := serve(t, "", server.WithInterceptors(func(ctx context.Context, _ *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		arrived <- struct{}{}
		return next(ctx, args)
	}))
	c := dial(t, "http://"+ts.addr)
	done := make(chan error, 1)
	go func() {
		_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "slow", Mode: wiretest.ModeWaitCtx})
		done <- err
	}()
	recv(t, arrived)
	ts.stop()
	require.ErrorIs(t, recv(t, done), client.ErrConnClosed)

	lim := proto.DefaultLimits
	lim.MaxMessageSize = wire.MinMessageSize
	ts = serve(t, "", server.WithLimits(lim))
	c = dial(t, "http://"+ts.addr+"/")
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: strings.Repeat("x", 2*wire.MinMessageSize)})
	require.ErrorIs(t, err, proto.ErrSizeLimit)
	var he *client.HTTPError
	require.ErrorAs(t, err, &he)
	require.Equal(t, http.StatusRequestEntityTooLarge, he.Status)
	require.Equal(t, "client: http://"+ts.addr+"/ answered HTTP 413 Request Entity Too Large: hatrpc: request body larger than 4100 bytes (the message size limit)", err.Error())
}

// Options that make no sense over HTTP are refused at Dial.
func TestHTTPDialOptions(t *testing.T) {
	cases := []struct {
		addr string
		opts []client.Option
		want string
	}{
		{"http://h/", []client.Option{client.WithFramed()}, "client: WithFramed does not apply to http://h/: an HTTP body carries one unframed message"},
		{"http://h/", []client.Option{client.WithFramedTHeader()}, "client: WithFramedTHeader does not apply to http://h/: an HTTP body carries one THeader frame (WithTHeader)"},
		{"http://h/", []client.Option{client.WithTLS(&tls.Config{})}, "client: WithTLS needs an https:// address, not http://h/"},
		{"http:///x", nil, `client: address "http:///x" has no host`},
		{"http://h/", []client.Option{client.WithHTTPHeader("a b", "v")}, `client: WithHTTPHeader("a b", "v"): not a valid HTTP header`},
	}
	for _, tc := range cases {
		_, err := client.Dial(context.Background(), tc.addr, tc.opts...)
		require.EqualError(t, err, tc.want)
	}
	// A header HTTP cannot carry fails the call before anything is sent.
	c := dial(t, "http://127.0.0.1:1/")
	err := c.Call(metadata.AppendToOutgoingContext(tctx(t), "k", "a\nb"), wiretest.EchoMethod, &wiretest.EchoArgs{}, &wiretest.EchoResult{})
	require.EqualError(t, err, `client: header "k": "a\nb" cannot travel as an HTTP header`)

	// A TCP client dialling an HTTP-only server is told so.
	hs := httptest.NewServer(http.NotFoundHandler())
	defer hs.Close()
	_, err = client.Dial(tctx(t), strings.TrimPrefix(hs.URL, "http://"))
	require.ErrorIs(t, err, client.ErrHTTPServer)
	require.Contains(t, err.Error(), "Thrift over HTTP: dial "+hs.URL)
}

// A Conn over HTTP: each call is one POST to the URL.
func ExampleDial_http() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "https://api.example.com/thrift",
		client.WithHTTPHeader("Authorization", "Bearer t0k"), client.WithCompact())
	if err != nil {
		return
	}
	defer c.Close()
	var res wiretest.EchoResult
	_ = c.Call(metadata.AppendToOutgoingContext(ctx, "tenant", "t1"), wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "hi"}, &res)
}
