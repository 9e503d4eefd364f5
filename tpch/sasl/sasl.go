// Package sasl is the server side of Thrift's SASL transport
// (TSaslServerTransport) with the PLAIN mechanism, as HiveServer2 clients
// speak it by default (PyHive auth='NONE'/'LDAP', impyla
// auth_mechanism='PLAIN', gohive "NONE"), and of HiveServer2's PLAIN over
// HTTP (Basic credentials on each request, BasicAuth): a listener that
// tells each connection's kind from its first bytes (sniff.go), runs the
// handshake on SASL ones and hands on those that authenticated, with
// NOSASL ones too when WithNOSASL allows them, and HTTP ones on HTTP().
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

	"github.com/hatrpc/hatrpc/pkg/server"
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
	// ErrNOSASL refuses a client that sent Thrift calls without a SASL
	// negotiation to a listener that requires PLAIN.
	ErrNOSASL = errors.New("sasl: this server requires SASL PLAIN authentication (a user and password); NOSASL connections are refused")
)

// Authenticator says whether user may connect with password.
type Authenticator func(ctx context.Context, user, password string) bool

// Option configures a Listener.
type Option func(*Listener)

// WithHandshakeTimeout bounds a connection's negotiation (default 10 s).
func WithHandshakeTimeout(d time.Duration) Option { return func(l *Listener) { l.timeout = d } }

// WithNOSASL also hands on connections that do not start a SASL
// negotiation as they are: NOSASL clients (a Thrift message, framed or
// not, first) and HatRPC's own. Without it PLAIN is required: such a
// connection gets ErrNOSASL as a Thrift exception (sniff.go) and is
// closed.
func WithNOSASL() Option { return func(l *Listener) { l.nosasl = true } }

// WithErrorLog receives each refused connection's error (default: none).
func WithErrorLog(f func(remote net.Addr, err error)) Option {
	return func(l *Listener) { l.onError = f }
}

// Listener accepts connections that completed a PLAIN negotiation (and
// NOSASL ones under WithNOSASL); HTTP connections go to HTTP().
type Listener struct {
	net.Listener
	auth    Authenticator
	timeout time.Duration
	onError func(net.Addr, error)
	nosasl  bool

	ready  chan net.Conn
	http   *httpListener
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	accErr error

	mu      sync.Mutex
	pending map[net.Conn]struct{} // connections not yet handed on: Close closes them
}

// Listen wraps ln: its Accept returns only connections whose client
// authenticated with PLAIN as auth allows (and NOSASL ones under
// WithNOSASL). Connections that start with an HTTP request line are
// handed on by HTTP(), which the caller must serve (with BasicAuth).
func Listen(ln net.Listener, auth Authenticator, opts ...Option) *Listener {
	l := &Listener{Listener: ln, auth: auth, timeout: 10 * time.Second,
		ready: make(chan net.Conn), done: make(chan struct{}), pending: map[net.Conn]struct{}{}}
	l.http = &httpListener{l: l, ch: make(chan net.Conn), done: make(chan struct{})}
	for _, o := range opts {
		o(l)
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	var backoff server.AcceptBackoff
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if server.AcceptRetryable(err) {
				// Out of descriptors passes as connections close.
				time.Sleep(backoff.Next())
				continue
			}
			_ = l.shut(err)
			return
		}
		backoff.Reset()
		if !l.track(c) {
			_ = c.Close()
			continue
		}
		// A goroutine per connection: one that sends nothing holds only
		// its own until the handshake timeout, never the others.
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			sc, isHTTP, err := l.admit(c)
			l.untrack(c)
			if err != nil {
				if l.onError != nil {
					l.onError(c.RemoteAddr(), err)
				}
				_ = c.Close()
				return
			}
			to, gone := l.ready, l.done
			if isHTTP {
				to, gone = l.http.ch, l.http.done // closed with l.done too
			}
			select {
			case to <- sc:
			case <-gone:
				_ = sc.Close()
			}
		}()
	}
}

// track records a connection being admitted; false once the listener is
// closed.
func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		return false
	}
	l.pending[c] = struct{}{}
	return true
}

func (l *Listener) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, c)
}

// Accept returns the next connection: negotiated, or NOSASL under
// WithNOSASL.
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

// Close stops accepting and closes the connections still negotiating
// (their goroutines end at once, not at the handshake timeout).
func (l *Listener) Close() error { return l.shut(nil) }

// shut closes the listener once; acceptErr, set before done is closed, is
// what Accept returns after (nil: net.ErrClosed).
func (l *Listener) shut(acceptErr error) error {
	var err error
	l.once.Do(func() {
		l.accErr = acceptErr
		close(l.done)
		_ = l.http.Close()
		err = l.Listener.Close()
		l.mu.Lock()
		for c := range l.pending {
			_ = c.Close()
		}
		l.pending = nil
		l.mu.Unlock()
	})
	return err
}

// Wait returns once every goroutine of the listener has ended (after
// Close).
func (l *Listener) Wait() { l.wg.Wait() }

// admit tells the connection's kind from its first bytes (sniff.go) and
// returns it ready for the server: negotiated for SASL (true: HTTP).
// Everything before the hand-on happens within the handshake timeout.
func (l *Listener) admit(c net.Conn) (net.Conn, bool, error) {
	if err := c.SetDeadline(time.Now().Add(l.timeout)); err != nil {
		return nil, false, err
	}
	r := bufio.NewReader(c)
	kind, err := sniff(r)
	if err != nil {
		return nil, false, err
	}
	switch {
	case kind == kindSASL:
		if err := l.handshake(r, c); err != nil {
			return nil, false, err
		}
	case kind == kindHTTP:
	case l.nosasl:
	default:
		return nil, false, refuse(r, c)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, false, err
	}
	return &conn{Conn: c, r: r}, kind == kindHTTP, nil
}

func (l *Listener) handshake(r *bufio.Reader, c net.Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if err := l.negotiate(ctx, r, c); err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			_ = writeMessage(c, statusBad, []byte(err.Error()))
		}
		return err
	}
	return nil
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
