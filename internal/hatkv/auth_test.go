package hatkv

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/testcert"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// serveAuth serves a fresh store with the given options (TLS, token) and
// returns its address and metrics registry.
func serveAuth(t *testing.T, opts ...Option) (string, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	all := append([]Option{WithLogger(quietLogger()), WithSetting("sync", "nosync"), WithSetting("mapsize", "64MiB"),
		WithTransport("tcp"), WithRegistry(reg)}, opts...)
	srv, err := Open(testCtx(t, 30*time.Second), t.TempDir(), all...)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
		defer cancel()
		require.NoError(t, srv.Shutdown(sctx))
		require.NoError(t, <-done)
	})
	return ln.Addr().String(), reg
}

func refusedCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "hatkv_connections_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	good := testcert.Write(t, dir, "good")
	other := testcert.Write(t, dir, "other")
	srvTLS, err := ServerTLS(good.Cert, good.Key, "")
	require.NoError(t, err)
	trusting, err := ClientTLS(good.CA, "", "", "")
	require.NoError(t, err)
	distrusting, err := ClientTLS(other.CA, "", "", "")
	require.NoError(t, err)

	tests := []struct {
		name      string
		srvTLS    *tls.Config
		srvToken  string
		cliTLS    *tls.Config
		cliToken  string
		wantErr   string
		wantIs    error
		refusedAs string // the server's metric label for the refusal
	}{
		{name: "plain"},
		{name: "token", srvToken: "s3cret", cliToken: "s3cret"},
		{name: "wrong token", srvToken: "s3cret", cliToken: "guess", wantIs: ErrTokenRefused,
			wantErr: "hatkv: the server refused the token (check --token / HATKV_TOKEN)", refusedAs: "token"},
		{name: "no token", srvToken: "s3cret", wantErr: "client: connection closed", refusedAs: "no_token"},
		{name: "token to a server without one", cliToken: "s3cret", wantErr: "waiting for the server to accept the token"},
		{name: "tls", srvTLS: srvTLS, cliTLS: trusting},
		{name: "tls and token", srvTLS: srvTLS, srvToken: "s3cret", cliTLS: trusting, cliToken: "s3cret"},
		{name: "tls and wrong token", srvTLS: srvTLS, srvToken: "s3cret", cliTLS: trusting, cliToken: "guess",
			wantIs: ErrTokenRefused, refusedAs: "token"},
		{name: "tls with an untrusted certificate", srvTLS: srvTLS, cliTLS: distrusting,
			wantErr: "certificate signed by unknown authority", refusedAs: "tls"},
		{name: "plain client to a tls server", srvTLS: srvTLS, wantErr: "answered with TLS: the server expects a TLS client", wantIs: client.ErrTLSServer, refusedAs: "tls"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sopts []Option
			if tc.srvTLS != nil {
				sopts = append(sopts, WithTLS(tc.srvTLS))
			}
			if tc.srvToken != "" {
				sopts = append(sopts, WithToken(tc.srvToken))
			}
			addr, reg := serveAuth(t, sopts...)
			ctx := testCtx(t, 20*time.Second)
			copts := []ClientOption{WithClientTransport("tcp"), WithConns(2),
				WithClientOptions(client.WithDialTimeout(5*time.Second), client.WithHandshakeTimeout(5*time.Second))}
			if tc.cliTLS != nil {
				copts = append(copts, WithClientTLS(tc.cliTLS))
			}
			if tc.cliToken != "" {
				copts = append(copts, WithClientToken(tc.cliToken))
			}
			c, err := Dial(ctx, addr, copts...)
			if err == nil {
				defer closeWithin(t, c, 10*time.Second)
				err = c.KV().Put(ctx, "k", hatkv.Record{"f": []byte("v")})
			}
			if tc.wantErr == "" && tc.wantIs == nil {
				require.NoError(t, err)
				got, err := c.KV().Get(ctx, "k", nil)
				require.NoError(t, err)
				assert.Equal(t, "v", string(got["f"]))
				return
			}
			require.Error(t, err)
			if tc.wantIs != nil {
				require.ErrorIs(t, err, tc.wantIs)
			}
			assert.Contains(t, err.Error(), tc.wantErr)
			if tc.refusedAs != "" {
				// The refusal is counted once the server's handshake
				// goroutine has finished; it is bounded by AuthTimeout.
				deadline := time.Now().Add(AuthTimeout + testenv.HangGuard(5*time.Second))
				for refusedCount(t, reg, tc.refusedAs) < 1 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				assert.GreaterOrEqual(t, refusedCount(t, reg, tc.refusedAs), 1.0)
			}
		})
	}
}

// TestAuthListenerSlowClient: a client that connects and sends nothing
// holds only its own handshake; others are served meanwhile, and Close
// ends it at once.
func TestAuthListenerSlowClient(t *testing.T) {
	addr, _ := serveAuth(t, WithToken("s3cret"))
	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	ctx := testCtx(t, 20*time.Second)
	c, err := Dial(ctx, addr, WithClientTransport("tcp"), WithClientToken("s3cret"))
	require.NoError(t, err)
	defer closeWithin(t, c, 10*time.Second)
	require.NoError(t, c.KV().Put(ctx, "k", hatkv.Record{"f": []byte("v")}))
}

func TestServerTLSConfigErrors(t *testing.T) {
	_, err := ServerTLS("", "key.pem", "")
	require.ErrorIs(t, err, ErrConfig)
	assert.EqualError(t, err, "hatkv: invalid configuration: TLS needs both --tls-cert and --tls-key")
	_, err = ClientTLS(t.TempDir()+"/missing.pem", "", "", "")
	require.ErrorIs(t, err, ErrConfig)
	assert.True(t, errors.Is(err, ErrConfig))
}

// TestAuthListenerPerIPCap: one address with maxPendingAuthPerIP silent
// connections gets its next one closed at once (counted as overload);
// once they go, a client with the token passes.
func TestAuthListenerPerIPCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// The idle connections are refused too (no_token) when they close;
	// only the first refusal matters here.
	refused := make(chan string, 1)
	al := NewAuthListener(ln, nil, "s3cret", quietLogger(), func(kind string) {
		select {
		case refused <- kind:
		default:
		}
	})
	defer al.Close()
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range maxPendingAuthPerIP {
		c, err := net.Dial("tcp", al.Addr().String())
		require.NoError(t, err)
		idle = append(idle, c)
	}
	pending := func() int {
		al.mu.Lock()
		defer al.mu.Unlock()
		return al.perIP["127.0.0.1"]
	}
	deadline := time.Now().Add(testenv.HangGuard(10 * time.Second))
	for pending() < maxPendingAuthPerIP && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, maxPendingAuthPerIP, pending())
	extra, err := net.Dial("tcp", al.Addr().String())
	require.NoError(t, err)
	defer extra.Close()
	select {
	case kind := <-refused:
		assert.Equal(t, "overload", kind)
	case <-time.After(testenv.HangGuard(10 * time.Second)):
		t.Fatal("the connection over the cap was not refused")
	}
	require.NoError(t, extra.SetReadDeadline(time.Now().Add(testenv.HangGuard(10*time.Second))))
	_, err = extra.Read(make([]byte, 1))
	require.Error(t, err, "closed by the server")

	for _, c := range idle {
		c.Close()
	}
	idle = nil
	// The listener releases their places as it sees each close: a client
	// dialing before that would still meet the cap.
	deadline = time.Now().Add(testenv.HangGuard(10 * time.Second))
	for pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Zero(t, pending())
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := al.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	ctx := testCtx(t, 20*time.Second)
	c, err := authDialer(nil, "s3cret")(ctx, al.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	select {
	case sc := <-accepted:
		sc.Close()
	case <-time.After(testenv.HangGuard(10 * time.Second)):
		t.Fatal("the token client was not accepted")
	}
}
