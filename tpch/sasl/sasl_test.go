package sasl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func msg(status byte, payload string) []byte {
	b := []byte{status, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

func allow(_ context.Context, user, password string) bool { return user == "u" && password == "p" }

// call is a strict binary Thrift call header (what NOSASL clients send
// first), with some of its arguments.
func call(name string, seqid uint32) []byte {
	b := []byte{0x80, 0x01, 0x00, 0x01}
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, seqid)
	return append(b, 0x0c, 0x00, 0x01, 0x08, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00)
}

func framed(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// TestHandshake runs connections against a Listener that requires PLAIN
// or also takes NOSASL ones and checks what the client reads back and
// where the listener hands the connection on.
func TestHandshake(t *testing.T) {
	const (
		ready   = "ready"   // Accept returns it
		toHTTP  = "http"    // HTTP().Accept returns it
		refused = "refused" // closed, the error reported
	)
	notSASL := "sasl: the client did not start a SASL negotiation: "
	nosaslRefused := "sasl: this server requires SASL PLAIN authentication (a user and password); NOSASL connections are refused (call OpenSession)"
	httpReq := []byte("POST /cliservice HTTP/1.1\r\nHost: x\r\n\r\n")
	cases := []struct {
		name   string
		nosasl bool // WithNOSASL
		send   []byte
		reply  []byte // what the client reads back until the server closes or hands on
		to     string
		err    string // what the listener reports
	}{
		{"ok, then a frame", false, append(append(msg(1, "PLAIN"), msg(2, "\x00u\x00p")...), "\x00\x00\x00\x02hi"...),
			msg(5, ""), ready, ""},
		{"ok with authzid", false, append(msg(1, "PLAIN"), msg(2, "admin\x00u\x00p")...), msg(5, ""), ready, ""},
		{"ok on a NOSASL listener", true, append(append(msg(1, "PLAIN"), msg(2, "\x00u\x00p")...), "\x00\x00\x00\x02hi"...),
			msg(5, ""), ready, ""},
		{"wrong password", false, append(msg(1, "PLAIN"), msg(2, "\x00u\x00x")...),
			msg(3, `sasl: authentication failed for user "u"`), refused, `sasl: authentication failed for user "u"`},
		{"wrong password on a NOSASL listener", true, append(msg(1, "PLAIN"), msg(2, "\x00u\x00x")...),
			msg(3, `sasl: authentication failed for user "u"`), refused, `sasl: authentication failed for user "u"`},
		{"other mechanism", false, msg(1, "GSSAPI"),
			msg(3, `sasl: unsupported mechanism "GSSAPI": this server speaks PLAIN`), refused, `sasl: unsupported mechanism "GSSAPI": this server speaks PLAIN`},
		{"OK first", false, msg(2, "PLAIN"),
			msg(3, "sasl: the client did not start a SASL negotiation: first message has status 2"), refused, notSASL + "first message has status 2"},
		{"no separators", false, append(msg(1, "PLAIN"), msg(2, "up")...),
			msg(3, "sasl: malformed message: PLAIN response is not authzid NUL user NUL password"), refused, "sasl: malformed message: PLAIN response is not authzid NUL user NUL password"},
		{"huge payload", false, []byte{1, 0x7f, 0, 0, 0},
			msg(3, "sasl: malformed message: 2130706432-byte payload (at most 65536)"), refused, "sasl: malformed message: 2130706432-byte payload (at most 65536)"},
		{"NOSASL call", false, call("OpenSession", 7), exception("OpenSession", 7, false), refused, nosaslRefused},
		{"NOSASL framed call", false, framed(call("OpenSession", 9)), exception("OpenSession", 9, true), refused, nosaslRefused},
		{"garbage", false, []byte("GARBAGE!"), nil, refused, notSASL + "first byte 0x47 is no SASL, HTTP or Thrift message"},
		{"binary garbage", false, []byte{0x00, 0x00, 0x00, 0x05, 0xde, 0xad, 0xbe, 0xef, 0x00}, nil, refused, notSASL + "first byte 0x00 is no SASL, HTTP or Thrift message"},
		{"NOSASL call on a NOSASL listener", true, call("OpenSession", 7), nil, ready, ""},
		{"garbage on a NOSASL listener", true, []byte("GARBAGE!"), nil, ready, ""}, // the server's to refuse
		{"HTTP", false, httpReq, nil, toHTTP, ""},
		{"HTTP on a NOSASL listener", true, httpReq, nil, toHTTP, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			errs := make(chan error, 1)
			opts := []Option{WithHandshakeTimeout(time.Minute), WithErrorLog(func(_ net.Addr, err error) { errs <- err })}
			if tc.nosasl {
				opts = append(opts, WithNOSASL())
			}
			l := Listen(ln, allow, opts...)
			defer func() { require.NoError(t, l.Close()); l.Wait() }()

			c, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(testenv.HangGuard(time.Minute))))
			_, err = c.Write(tc.send)
			require.NoError(t, err)

			if tc.to == refused {
				got, err := io.ReadAll(c) // up to the server's close
				require.NoError(t, err)
				if len(tc.reply) == 0 {
					assert.Empty(t, got, "closed without a reply")
				} else {
					assert.Equal(t, tc.reply, got)
				}
				require.NoError(t, c.Close()) // the server reads until the client goes
				select {
				case err := <-errs:
					assert.EqualError(t, err, tc.err)
				case <-time.After(testenv.HangGuard(time.Minute)):
					require.FailNow(t, "no error reported")
				}
				return
			}
			if len(tc.reply) > 0 {
				got := make([]byte, len(tc.reply))
				_, err = io.ReadFull(c, got)
				require.NoError(t, err)
				assert.Equal(t, tc.reply, got)
			}
			accept := l.Accept
			if tc.to == toHTTP {
				accept = l.HTTP().Accept
			}
			sc, err := accept()
			require.NoError(t, err)
			defer sc.Close()
			rest := tc.send
			if len(tc.reply) > 0 { // after a negotiation: its frames
				rest = []byte("\x00\x00\x00\x02hi")
				if !bytes.HasSuffix(tc.send, rest) {
					return
				}
			}
			got := make([]byte, len(rest))
			_, err = io.ReadFull(sc, got)
			require.NoError(t, err)
			assert.Equal(t, rest, got, "the bytes after what the listener read reach the server")
		})
	}
}

// exception is the refusal of a NOSASL call: a TApplicationException of
// type UNSUPPORTED_CLIENT_TYPE for the call's name and sequence id.
func exception(name string, seqid int32, isFramed bool) []byte {
	w := proto.NewBinaryWriter(nil)
	w.WriteMessageBegin(name, proto.Exception, seqid)
	require.NoError(nil, proto.NewApplicationException(proto.ExcUnsupportedClientType, ErrNOSASL.Error()).EncodeBinary(w))
	if isFramed {
		return framed(w.Bytes())
	}
	return w.Bytes()
}

// TestSilentConnection: a connection that sends nothing holds neither
// Accept nor the other connections' handshakes; Close closes it at once
// (the handshake timeout here is an hour); and a short handshake timeout
// closes one by itself.
func TestSilentConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := Listen(ln, allow, WithHandshakeTimeout(time.Hour), WithNOSASL())
	silent, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer silent.Close()
	require.NoError(t, silent.SetDeadline(time.Now().Add(testenv.HangGuard(time.Minute))))

	for _, send := range [][]byte{append(msg(1, "PLAIN"), msg(2, "\x00u\x00p")...), call("OpenSession", 1)} {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		_, err = c.Write(send)
		require.NoError(t, err)
		sc, err := l.Accept()
		require.NoError(t, err)
		require.NoError(t, sc.Close())
		require.NoError(t, c.Close())
	}
	require.NoError(t, l.Close())
	l.Wait()
	_, err = silent.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "Close closed the silent connection")

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	errs := make(chan error, 1)
	l = Listen(ln, allow, WithHandshakeTimeout(time.Millisecond), WithErrorLog(func(_ net.Addr, err error) { errs <- err }))
	defer func() { require.NoError(t, l.Close()); l.Wait() }()
	silent, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer silent.Close()
	require.NoError(t, silent.SetDeadline(time.Now().Add(testenv.HangGuard(time.Minute))))
	_, err = silent.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the handshake timeout closed the silent connection")
	assert.ErrorIs(t, <-errs, os.ErrDeadlineExceeded)
}

// TestBasicAuth checks PLAIN over HTTP: which requests reach the handler
// and what the others get.
func TestBasicAuth(t *testing.T) {
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	cases := []struct {
		name     string
		optional bool
		header   string
		status   int
		body     string
	}{
		{"right", false, basic("u", "p"), http.StatusOK, "served\n"},
		{"wrong", false, basic("u", "x"), http.StatusUnauthorized, "sasl: authentication failed for user \"u\"\n"},
		{"none", false, "", http.StatusUnauthorized, "sasl: this server requires a user and password (HTTP Basic credentials)\n"},
		{"not Basic", false, "Negotiate abc", http.StatusUnauthorized, "sasl: malformed message: the Authorization header is not Basic credentials\n"},
		{"right, optional", true, basic("u", "p"), http.StatusOK, "served\n"},
		{"wrong, optional", true, basic("u", "x"), http.StatusUnauthorized, "sasl: authentication failed for user \"u\"\n"},
		{"none, optional", true, "", http.StatusOK, "served\n"},
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "served\n") })
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/cliservice", strings.NewReader("x"))
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			w := httptest.NewRecorder()
			BasicAuth(next, allow, tc.optional).ServeHTTP(w, r)
			assert.Equal(t, tc.status, w.Code)
			assert.Equal(t, tc.body, w.Body.String())
			if tc.status == http.StatusUnauthorized {
				assert.Equal(t, `Basic realm="HiveServer2", charset="UTF-8"`, w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

func TestAcceptAfterClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := Listen(ln, allow)
	require.NoError(t, l.Close())
	l.Wait()
	_, err = l.Accept()
	assert.True(t, errors.Is(err, net.ErrClosed), "%v", err)
}

// FuzzNegotiate feeds arbitrary bytes to the server's side of the
// negotiation: it ends in an error or success, never a panic, and
// succeeds only for the one user and password allowed.
func FuzzNegotiate(f *testing.F) {
	f.Add(append(msg(1, "PLAIN"), msg(2, "\x00u\x00p")...))
	f.Add(append(msg(1, "PLAIN"), msg(5, "a\x00b\x00c\x00d")...))
	f.Add(msg(1, "GSSAPI"))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var user, password string
		l := &Listener{auth: func(_ context.Context, u, p string) bool {
			user, password = u, p
			return allow(context.Background(), u, p)
		}}
		if err := l.negotiate(context.Background(), bytes.NewReader(b), io.Discard); err == nil {
			require.Equal(t, []string{"u", "p"}, []string{user, password})
		}
	})
}

// FuzzSniff feeds arbitrary first bytes to the routing and to the header
// reader of a refused call: never a panic, and a call's header is read
// only from a strict binary message, framed or not.
func FuzzSniff(f *testing.F) {
	f.Add(call("OpenSession", 7))
	f.Add(framed(call("GetInfo", 1)))
	f.Add(msg(1, "PLAIN"))
	f.Add([]byte("POST / HTTP/1.1\r\n"))
	f.Add([]byte{0x80, 0x01, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := sniff(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			require.Empty(t, b)
			return
		}
		if k != kindOther {
			return
		}
		name, _, isFramed, ok := thriftCall(bufio.NewReader(bytes.NewReader(b)))
		if ok {
			off := 0
			if isFramed {
				off = 4
			}
			require.Equal(t, []byte{0x80, 0x01}, b[off:off+2])
			require.LessOrEqual(t, len(name), maxName)
		}
	})
}

// TestHTTPClosed: once nobody serves HTTP(), HTTP connections are closed
// and the others still handed on, every time.
func TestHTTPClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := Listen(ln, allow, WithNOSASL())
	defer func() { require.NoError(t, l.Close()); l.Wait() }()
	require.NoError(t, l.HTTP().Close())
	_, err = l.HTTP().Accept()
	require.ErrorIs(t, err, net.ErrClosed)

	h, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, h.SetDeadline(time.Now().Add(testenv.HangGuard(time.Minute))))
	_, err = h.Write([]byte("POST /cliservice HTTP/1.1\r\n\r\n"))
	require.NoError(t, err)
	_, err = h.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the HTTP connection is closed")

	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		want := call("OpenSession", uint32(i))
		_, err = c.Write(want)
		require.NoError(t, err)
		sc, err := l.Accept()
		require.NoError(t, err)
		require.NoError(t, sc.SetDeadline(time.Now().Add(testenv.HangGuard(time.Minute))))
		got := make([]byte, len(want))
		_, err = io.ReadFull(sc, got)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		require.NoError(t, sc.Close())
		require.NoError(t, c.Close())
	}
}

// TestOutOfDescriptors: accepts failing for a moment (out of descriptors)
// do not shut the listener; the first such error shut it before.
func TestOutOfDescriptors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := Listen(&testutil.FailingListener{Listener: ln, N: 3, Err: testutil.AcceptErr(syscall.EMFILE)}, allow, WithNOSASL())
	defer func() { require.NoError(t, l.Close()); l.Wait() }()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(call("OpenSession", 1))
	require.NoError(t, err)
	// The descriptors came back: the listener must accept again.
	testutil.AcceptWithin(t, l, 10*time.Second)
}
