package sasl

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func msg(status byte, payload string) []byte {
	b := []byte{status, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

func allow(_ context.Context, user, password string) bool { return user == "u" && password == "p" }

// TestHandshake runs negotiations against a Listener and checks what the
// client reads back and what Accept hands on.
func TestHandshake(t *testing.T) {
	cases := []struct {
		name     string
		send     []byte
		reply    []byte // what the client reads back
		accepted bool
		err      string // what the listener reports
	}{
		{"ok, then a frame", append(append(msg(1, "PLAIN"), msg(2, "\x00u\x00p")...), "\x00\x00\x00\x02hi"...),
			msg(5, ""), true, ""},
		{"ok with authzid", append(msg(1, "PLAIN"), msg(2, "admin\x00u\x00p")...), msg(5, ""), true, ""},
		{"wrong password", append(msg(1, "PLAIN"), msg(2, "\x00u\x00x")...),
			msg(3, `sasl: authentication failed for user "u"`), false, `sasl: authentication failed for user "u"`},
		{"other mechanism", msg(1, "GSSAPI"),
			msg(3, `sasl: unsupported mechanism "GSSAPI": this server speaks PLAIN`), false, `sasl: unsupported mechanism "GSSAPI": this server speaks PLAIN`},
		{"not SASL", []byte("\x80\x01\x00\x01\x00\x00\x00\x0bOpenSession"),
			msg(3, "sasl: the client did not start a SASL negotiation: status byte 0x80"), false, "sasl: the client did not start a SASL negotiation: status byte 0x80"},
		{"OK first", msg(2, "PLAIN"),
			msg(3, "sasl: the client did not start a SASL negotiation: first message has status 2"), false, "sasl: the client did not start a SASL negotiation: first message has status 2"},
		{"no separators", append(msg(1, "PLAIN"), msg(2, "up")...),
			msg(3, "sasl: malformed message: PLAIN response is not authzid NUL user NUL password"), false, "sasl: malformed message: PLAIN response is not authzid NUL user NUL password"},
		{"huge payload", []byte{1, 0x7f, 0, 0, 0},
			msg(3, "sasl: malformed message: 2130706432-byte payload (at most 65536)"), false, "sasl: malformed message: 2130706432-byte payload (at most 65536)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			errs := make(chan error, 1)
			l := Listen(ln, allow, WithHandshakeTimeout(time.Minute), WithErrorLog(func(_ net.Addr, err error) { errs <- err }))
			defer func() { require.NoError(t, l.Close()); l.Wait() }()

			c, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(time.Minute)))
			_, err = c.Write(tc.send)
			require.NoError(t, err)
			got := make([]byte, len(tc.reply))
			_, err = io.ReadFull(c, got)
			require.NoError(t, err)
			assert.Equal(t, tc.reply, got)

			if !tc.accepted {
				select {
				case err := <-errs:
					assert.EqualError(t, err, tc.err)
				case <-time.After(time.Minute):
					require.FailNow(t, "no error reported")
				}
				_, err := c.Read(make([]byte, 1))
				assert.ErrorIs(t, err, io.EOF, "the refused connection is closed")
				return
			}
			sc, err := l.Accept()
			require.NoError(t, err)
			defer sc.Close()
			if bytes.HasSuffix(tc.send, []byte("hi")) {
				frame := make([]byte, 6)
				_, err = io.ReadFull(sc, frame)
				require.NoError(t, err)
				assert.Equal(t, []byte("\x00\x00\x00\x02hi"), frame, "bytes after the handshake reach the server")
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
