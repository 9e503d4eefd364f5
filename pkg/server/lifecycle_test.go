package server_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestShutdownGracefulVsClose(t *testing.T) {
	t.Run("graceful", func(t *testing.T) {
		s, _, addr := start(t)
		c := dial(t, addr)
		slow := make(chan error, 1)
		go func() {
			got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "inflight", DelayNs: int64(300 * time.Millisecond)})
			if err == nil && got != "inflight" {
				err = io.ErrUnexpectedEOF
			}
			slow <- err
		}()
		waitInFlight(t, s, 1)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Second))
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		require.NoError(t, <-slow, "in-flight call must complete during graceful shutdown")
		mfs, err := s.Registry().Gather()
		require.NoError(t, err)
		require.Equal(t, 1.0, metricValue(mfs, "hatrpc_server_calls_total", map[string]string{"function": "echo"}))
		require.Equal(t, 0.0, metricValue(mfs, "hatrpc_server_errors_total", nil))
		require.Equal(t, 0.0, metricValue(mfs, "hatrpc_server_connections", nil))
		// New connections are refused once shut down.
		_, err = net.DialTimeout("tcp", addr, testenv.HangGuard(time.Second))
		require.Error(t, err)
		_, err = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "late"})
		require.ErrorIs(t, err, client.ErrConnClosed)
	})
	t.Run("shutdown-deadline-forces-close", func(t *testing.T) {
		s, e, addr := start(t)
		c := dial(t, addr)
		stuck := make(chan error, 1)
		go func() {
			_, err := echo(context.Background(), c, &wiretest.EchoArgs{Msg: "stuck", Mode: wiretest.ModeWaitCtx})
			stuck <- err
		}()
		waitInFlight(t, s, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, s.Shutdown(ctx), context.DeadlineExceeded)
		require.Equal(t, "stuck", <-e.Cancelled)
		require.ErrorIs(t, <-stuck, client.ErrConnClosed)
	})
	t.Run("close", func(t *testing.T) {
		s, e, addr := start(t)
		c := dial(t, addr)
		stuck := make(chan error, 1)
		go func() {
			_, err := echo(context.Background(), c, &wiretest.EchoArgs{Msg: "closed", Mode: wiretest.ModeWaitCtx})
			stuck <- err
		}()
		waitInFlight(t, s, 1)
		require.NoError(t, s.Close())
		require.Equal(t, "closed", <-e.Cancelled)
		require.ErrorIs(t, <-stuck, client.ErrConnClosed)
	})
}

func TestBadInputClosesConnOnly(t *testing.T) {
	_, _, addr := start(t, server.WithLimits(proto.Limits{MaxMessageSize: 1 << 20, MaxDepth: 16, MaxStringLength: 1 << 20, MaxContainerSize: 1 << 16}))
	bigFramed := func() []byte {
		// A framed binary call whose length claims ~2 GiB.
		b := binary.BigEndian.AppendUint32(nil, 0x7fffffff)
		b = binary.BigEndian.AppendUint32(b, 0x80010001)
		b = binary.BigEndian.AppendUint32(b, 4)
		b = append(b, "echo"...)
		return binary.BigEndian.AppendUint32(b, 7)
	}
	cases := []struct {
		name      string
		payload   []byte
		wantReply bool
	}{
		{"garbage", []byte("SSH-2.0-OpenSSH_9.6\r\n"), false},
		// HTTP is served (405 for a GET), then closed as asked.
		{"http-get", []byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), false},
		{"2GiB-frame", bigFramed(), true},
		{"2GiB-len-0x80", []byte{0x80, 0, 0, 0, 0x80, 1, 0, 1}, false},
		{"bad-compact-version", []byte{0x82, 0x05, 0, 0, 0, 0}, false},
		{"unframed-huge-string", append([]byte{0x80, 1, 0, 1, 0x7f, 0xff, 0xff, 0xff}, "echo"...), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(time.Second))
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(5*time.Second))))
			_, err = nc.Write(tc.payload)
			require.NoError(t, err)
			got, err := io.ReadAll(nc) // returns once the server closes
			require.NoError(t, err)
			if tc.wantReply {
				require.NotEmpty(t, got)
				require.Contains(t, string(got), "size limit")
			}
			// The server keeps serving others.
			c := dial(t, addr)
			msg, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "alive"})
			require.NoError(t, err)
			require.Equal(t, "alive", msg)
		})
	}
}

func TestHatFrameTooLarge(t *testing.T) {
	_, _, addr := start(t, server.WithLimits(proto.Limits{MaxMessageSize: wire.MinMessageSize, MaxDepth: 16, MaxStringLength: 1024, MaxContainerSize: 1024}))
	c := dial(t, addr)
	require.True(t, c.Upgraded())
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "big", Blob: make([]byte, 2*wire.MinMessageSize)})
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	require.Equal(t, proto.ExcProtocolError, ae.Type)
	// The server closes that connection. A call racing with the close may
	// fail with the typed error; a later one reconnects.
	_, err = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "racing"})
	if err != nil {
		require.ErrorIs(t, err, client.ErrConnClosed)
	}
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "small"})
	require.NoError(t, err)
	require.Equal(t, "small", got)
}

func selfSigned(t *testing.T) (*tls.Config, *tls.Config) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hatrpc-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	return srv, &tls.Config{RootCAs: pool}
}

func TestTLS(t *testing.T) {
	scfg, ccfg := selfSigned(t)
	_, _, addr := start(t, server.WithTLS(scfg))
	for _, opts := range [][]client.Option{{client.WithTLS(ccfg)}, {client.WithTLS(ccfg), client.WithoutUpgrade(), client.WithCompact()}} {
		c := dial(t, addr, opts...)
		got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "secret"})
		require.NoError(t, err)
		require.Equal(t, "secret", got)
	}
	// Plain TCP against the TLS port fails rather than hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithHandshakeTimeout(300*time.Millisecond))
	if err == nil {
		_, err = echo(ctx, c, &wiretest.EchoArgs{Msg: "x"})
		c.Close()
	}
	require.Error(t, err)
}

func TestMultipleServicesAndInterceptors(t *testing.T) {
	var trace []string
	mk := func(tag string) server.Interceptor {
		return func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
			trace = append(trace, tag+">"+info.Service+"."+info.Method.Name+"/"+info.Transport)
			res, err := next(ctx, args)
			trace = append(trace, tag+"<")
			return res, err
		}
	}
	e2 := wiretest.NewEcho()
	s, _, addr := start(t, server.WithInterceptors(mk("a"), mk("b")))
	s.Register(e2.ServiceNamed("Other"))
	require.Panics(t, func() { s.Register(e2.ServiceNamed("Other")) })

	c := dial(t, addr, client.WithMultiplexed())
	var res wiretest.EchoResult
	require.NoError(t, c.Call(tctx(t), &client.Method{Service: "Other", Name: "echo"}, &wiretest.EchoArgs{Msg: "o"}, &res))
	require.Equal(t, "o", *res.Success)
	require.Equal(t, []string{"a>Other.echo/tcp", "b>Other.echo/tcp", "b<", "a<"}, trace)

	trace = nil
	plain := dial(t, addr, client.WithoutUpgrade()) // plain name goes to the first registered service
	require.NoError(t, plain.Call(tctx(t), &client.Method{Name: "echo"}, &wiretest.EchoArgs{Msg: "p"}, &res))
	require.Equal(t, []string{"a>Echo.echo/thrift", "b>Echo.echo/thrift", "b<", "a<"}, trace)
}

// An Apache Go client (framed or not, binary or compact) talks to the
// HatRPC server on the same port as HatRPC clients.
func TestApacheClient(t *testing.T) {
	_, e, addr := start(t)
	for _, framed := range []bool{false, true} {
		for _, compact := range []bool{false, true} {
			conf := &thrift.TConfiguration{ConnectTimeout: testenv.HangGuard(time.Second), SocketTimeout: testenv.HangGuard(5 * time.Second)}
			var tr thrift.TTransport = thrift.NewTSocketConf(addr, conf)
			if framed {
				tr = thrift.NewTFramedTransportConf(tr, conf)
			} else {
				tr = thrift.NewTBufferedTransport(tr, 4096)
			}
			require.NoError(t, tr.Open())
			var p thrift.TProtocol = thrift.NewTBinaryProtocolConf(tr, conf)
			if compact {
				p = thrift.NewTCompactProtocolConf(tr, conf)
			}
			cl := thrift.NewTStandardClient(p, p)
			for _, msg := range []string{"a", "bb"} {
				var res wiretest.ApacheEchoResult
				_, err := cl.Call(tctx(t), "echo", &wiretest.ApacheEchoArgs{Msg: msg}, &res)
				require.NoError(t, err)
				require.NotNil(t, res.Success)
				assert.Equal(t, msg, *res.Success)
			}
			_, err := cl.Call(tctx(t), "fire", &wiretest.ApacheEchoArgs{Msg: "oneway"}, nil)
			require.NoError(t, err)
			select {
			case got := <-e.Fired:
				require.Equal(t, "oneway", got)
			case <-time.After(testenv.HangGuard(5 * time.Second)):
				t.Fatal("Apache oneway not delivered")
			}
			var res wiretest.ApacheEchoResult
			_, err = cl.Call(tctx(t), "nope", &wiretest.ApacheEchoArgs{Msg: "x"}, &res)
			var ae thrift.TApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, int32(thrift.UNKNOWN_METHOD), ae.TypeId())
			tr.Close()
		}
	}
}

// rawHat performs the handshake by hand and returns the upgraded socket.
func rawHat(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(time.Second))
	require.NoError(t, err)
	require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(5*time.Second))))
	c := wire.GetCodec()
	defer wire.PutCodec(c)
	hello, err := c.AppendMessage(nil, proto.Binary, wire.HelloMethod, proto.Call, 0,
		&wire.Hello{Version: wire.Version, Caps: wire.CapFraming})
	require.NoError(t, err)
	_, err = nc.Write(hello)
	require.NoError(t, err)
	br := bufio.NewReader(nc)
	msg, err := wire.ReadMessage(br, wire.Format{Proto: proto.Binary}, nil, nil)
	require.NoError(t, err)
	mh, err := wire.ParseMsgHeader(proto.Binary, msg)
	require.NoError(t, err)
	var rep wire.HelloReply
	require.NoError(t, c.Decode(proto.Binary, msg[mh.Body:], nil, &rep))
	require.Equal(t, wire.CapFraming, rep.Caps)
	require.Equal(t, "tcp", rep.Transport)
	return nc, br
}

func TestHatRawFrames(t *testing.T) {
	_, _, addr := start(t)
	frame := func(kind wire.Kind, seq int32, payload []byte) []byte {
		b := append(make([]byte, wire.HeaderSize), payload...)
		wire.SealFrame(b, kind, 0, seq, 0)
		return b
	}
	c := wire.GetCodec()
	call, err := c.AppendMessage(nil, proto.Binary, "echo", proto.Call, 5, &wiretest.EchoArgs{Msg: "raw"})
	require.NoError(t, err)
	wire.PutCodec(c)
	cases := []struct {
		name   string
		send   []byte
		closed bool
	}{
		{"cancel-unknown-seqid-then-call", append(frame(wire.KindCancel, 99, nil), frame(wire.KindCall, 5, call)...), false},
		{"reply-kind-from-client", frame(wire.KindReply, 1, call), true},
		{"reserved-bits", func() []byte { b := frame(wire.KindCall, 5, call); b[6] = 1; return b }(), true},
		{"garbage-payload", frame(wire.KindCall, 5, []byte("garbage!")), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, br := rawHat(t, addr)
			defer nc.Close()
			_, err := nc.Write(tc.send)
			require.NoError(t, err)
			h, fr, err := wire.ReadFrame(br, nil, 1<<20)
			if tc.closed {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				require.Equal(t, wire.KindReply, h.Kind)
				require.Equal(t, int32(5), h.Seqid)
				require.Contains(t, string(fr), "raw")
			}
			got, err := echo(tctx(t), dial(t, addr), &wiretest.EchoArgs{Msg: "alive"})
			require.NoError(t, err)
			require.Equal(t, "alive", got)
		})
	}
}

// A client that sends calls but never reads the replies is dropped after
// the write timeout instead of pinning server memory and goroutines.
func TestWriteTimeoutDropsNonReadingClient(t *testing.T) {
	s, _, addr := start(t, server.WithWriteTimeout(200*time.Millisecond))
	nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(time.Second))
	require.NoError(t, err)
	defer nc.Close()
	c := wire.GetCodec()
	msg, err := c.AppendMessage(nil, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "x", Blob: make([]byte, 1<<20)})
	wire.PutCodec(c)
	require.NoError(t, err)
	require.NoError(t, nc.SetWriteDeadline(time.Now().Add(testenv.HangGuard(5*time.Second))))
	for range 40 { // ~40 MiB of replies, far beyond the socket buffers
		if _, err := nc.Write(msg); err != nil {
			break // the server already gave up on us
		}
	}
	deadline := time.Now().Add(testenv.HangGuard(10 * time.Second))
	for {
		mfs, err := s.Registry().Gather()
		require.NoError(t, err)
		if metricValue(mfs, "hatrpc_server_connections", nil) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "non-reading client still connected")
		time.Sleep(20 * time.Millisecond)
	}
	got, err := echo(tctx(t), dial(t, addr), &wiretest.EchoArgs{Msg: "alive"})
	require.NoError(t, err)
	require.Equal(t, "alive", got)
}

// A reply frame echoes the request frame's seqid, which clients dispatch
// on, and its payload the payload's seqid, even when a client numbers the
// two differently (docs/design/wire.md, section 3).
func TestReplyEchoesFrameSeqid(t *testing.T) {
	_, _, addr := start(t)
	cases := []struct {
		name       string
		method     string
		frame, msg int32
		kind       wire.Kind
	}{
		{"reply", "echo", 5, 77, wire.KindReply},
		{"unknown-method", "nope", 6, 78, wire.KindException},
		{"same", "echo", 9, 9, wire.KindReply},
	}
	nc, br := rawHat(t, addr)
	defer nc.Close()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := wire.GetCodec()
			defer wire.PutCodec(c)
			b, err := c.AppendMessage(make([]byte, wire.HeaderSize), proto.Binary, tc.method, proto.Call, tc.msg, &wiretest.EchoArgs{Msg: "s"})
			require.NoError(t, err)
			wire.SealFrame(b, wire.KindCall, 0, tc.frame, 0)
			_, err = nc.Write(b)
			require.NoError(t, err)
			h, fr, err := wire.ReadFrame(br, nil, 1<<20)
			require.NoError(t, err)
			require.Equal(t, tc.kind, h.Kind)
			require.Equal(t, tc.frame, h.Seqid, "frame seqid")
			mh, err := wire.ParseMsgHeader(proto.Binary, fr[wire.HeaderSize:])
			require.NoError(t, err)
			require.Equal(t, tc.msg, mh.Seqid, "payload seqid")
		})
	}
}
