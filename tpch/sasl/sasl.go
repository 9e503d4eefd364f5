// Package sasl is the server side of Thrift's SASL transport
// (TSaslServerTransport) with the PLAIN mechanism, as HiveServer2 clients
// speak it by default (PyHive auth='NONE'/'LDAP', impyla
// auth_mechanism='PLAIN', gohive "NONE"): a listener that runs the
// handshake on each connection and hands on those that authenticated.
// After the handshake PLAIN's frames are a 4-byte big-endian length and
// the payload, which is Thrift's framed transport: the HatRPC server
// behind the listener reads and answers them as such.
package sasl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Status bytes of Thrift's SASL negotiation messages.
const (
	statusStart    = 1
	statusOK       = 2
	statusBad      = 3
	statusComplete = 5 // 4 is ERROR, which a server does not send here
)

// maxPayload bounds a negotiation message: a mechanism name or PLAIN's
// "authzid NUL user NUL password" is far smaller.
const maxPayload = 64 << 10

// Errors of the handshake; each is also sent to the client in a BAD
// message before the connection is closed.
var (
	ErrNotSASL      = errors.New("sasl: the client did not start a SASL negotiation")
	ErrMechanism    = errors.New("sasl: unsupported mechanism")
	ErrMalformed    = errors.New("sasl: malformed message")
	ErrUnauthorized = errors.New("sasl: authentication failed")
)

// Authenticator says whether user may connect with password.
type Authenticator func(ctx context.Context, user, password string) bool

// Option configures a Listener.
type Option func(*Listener)

// WithHandshakeTimeout bounds a connection's negotiation (default 10 s).
func WithHandshakeTimeout(d time.Duration) Option { return func(l *Listener) { l.timeout = d } }

// WithErrorLog receives each refused connection's error (default: none).
func WithErrorLog(f func(remote net.Addr, err error)) Option {
	return func(l *Listener) { l.onError = f }
}

// Listener accepts connections that completed a PLAIN negotiation.
type Listener struct {
	net.Listener
	auth    Authenticator
	timeout time.Duration
	onError func(net.Addr, error)

	ready  chan net.Conn
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	accErr error
}

// Listen wraps ln: its Accept returns only connections whose client
// authenticated with PLAIN as auth allows.
func Listen(ln net.Listener, auth Authenticator, opts ...Option) *Listener {
	l := &Listener{Listener: ln, auth: auth, timeout: 10 * time.Second,
		ready: make(chan net.Conn), done: make(chan struct{})}
	for _, o := range opts {
		o(l)
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			_ = l.shut(err)
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			sc, err := l.handshake(c)
			if err != nil {
				if l.onError != nil {
					l.onError(c.RemoteAddr(), err)
				}
				_ = c.Close()
				return
			}
			select {
			case l.ready <- sc:
			case <-l.done:
				_ = sc.Close()
			}
		}()
	}
}

// Accept returns the next authenticated connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		if l.accErr != nil {
			return nil, l.accErr
		}
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections still negotiating are closed when
// their handshake ends (within the handshake timeout).
func (l *Listener) Close() error { return l.shut(nil) }

// shut closes the listener once; acceptErr, set before done is closed, is
// what Accept returns after (nil: net.ErrClosed).
func (l *Listener) shut(acceptErr error) error {
	var err error
	l.once.Do(func() {
		l.accErr = acceptErr
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

// Wait returns once every goroutine of the listener has ended (after
// Close).
func (l *Listener) Wait() { l.wg.Wait() }

func (l *Listener) handshake(c net.Conn) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if err := c.SetDeadline(time.Now().Add(l.timeout)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	if err := l.negotiate(ctx, r, c); err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			_ = writeMessage(c, statusBad, []byte(err.Error()))
		}
		return nil, err
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return &conn{Conn: c, r: r}, nil
}

func (l *Listener) negotiate(ctx context.Context, r io.Reader, w io.Writer) error {
	st, mech, err := readMessage(r)
	if err != nil {
		return err
	}
	if st != statusStart {
		return fmt.Errorf("%w: first message has status %d", ErrNotSASL, st)
	}
	if string(mech) != "PLAIN" {
		return fmt.Errorf("%w %q: this server speaks PLAIN", ErrMechanism, mech)
	}
	st, resp, err := readMessage(r)
	if err != nil {
		return err
	}
	if st != statusOK && st != statusComplete {
		return fmt.Errorf("%w: PLAIN response has status %d", ErrMalformed, st)
	}
	user, pass, err := ParsePLAIN(resp)
	if err != nil {
		return err
	}
	if !l.auth(ctx, user, pass) {
		return fmt.Errorf("%w for user %q", ErrUnauthorized, user)
	}
	return writeMessage(w, statusComplete, nil)
}

// ParsePLAIN splits PLAIN's initial response (RFC 4616): authzid NUL
// authcid NUL password.
func ParsePLAIN(b []byte) (user, password string, err error) {
	parts := bytes.Split(b, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return "", "", fmt.Errorf("%w: PLAIN response is not authzid NUL user NUL password", ErrMalformed)
	}
	return string(parts[1]), string(parts[2]), nil
}

// readMessage reads one negotiation message: status, 4-byte big-endian
// length, payload.
func readMessage(r io.Reader) (status byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	if hdr[0] < statusStart || hdr[0] > statusComplete {
		return 0, nil, fmt.Errorf("%w: status byte %#x", ErrNotSASL, hdr[0])
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxPayload {
		return 0, nil, fmt.Errorf("%w: %d-byte payload (at most %d)", ErrMalformed, n, maxPayload)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return hdr[0], payload, nil
}

func writeMessage(w io.Writer, status byte, payload []byte) error {
	b := make([]byte, 5+len(payload))
	b[0] = status
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	copy(b[5:], payload)
	_, err := w.Write(b)
	return err
}

// conn is a negotiated connection: reads start with what the handshake's
// reader buffered past the last negotiation message.
type conn struct {
	net.Conn
	r *bufio.Reader
}

func (c *conn) Read(p []byte) (int, error) { return c.r.Read(p) }
