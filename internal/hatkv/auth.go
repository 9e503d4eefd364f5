package hatkv

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// The token preamble. A client with a token sends tokenMagic, the token's
// length (uint16, big endian) and the token before its first Thrift byte
// (inside TLS when TLS is on); the server answers one byte, authOK or
// authRefused, and closes after a refusal. It lives in front of the RPC
// server, on the listener, so pkg/server stays unchanged and a server
// without a token serves plain Thrift clients exactly as before. Lane
// attachments are TCP connections to the same listener, so they pass it too.
const (
	tokenMagic  = "HATKVTK1"
	maxTokenLen = 1024
	authOK      = 0
	authRefused = 1
)

// AuthTimeout bounds a connection's TLS handshake and token preamble.
const AuthTimeout = 10 * time.Second

// Connections in their handshake at once, in all and from one IP address;
// more are closed at once, so clients that never finish cannot hold
// unbounded fds. When all places are taken, a connection from an address
// that holds fewer of them than the address holding the most takes that
// address's oldest place (fair shares): however many addresses fill the
// places, a new one gets in.
const (
	maxPendingAuth      = 1024
	maxPendingAuthPerIP = 64
)

// Wrong tokens from one address: authFailBurst at once, then
// authFailRate a second; past that its connections are closed before
// their token is read, so guessing is bounded per address.
const (
	authFailRate  = 10
	authFailBurst = 20
	// maxFailAddrs bounds the addresses whose failures are remembered.
	maxFailAddrs = 4096
)

// ErrTokenRefused is a client's error when the server rejected its token.
var ErrTokenRefused = errors.New("hatkv: the server refused the token (check --token / " + TokenEnv + ")")

// TokenEnv is the environment variable the CLI reads the token from.
const TokenEnv = "HATKV_TOKEN"

// AuthListener wraps a listener: each accepted connection completes the
// TLS handshake (when tlsCfg is set) and presents the token (when token is
// not empty) on its own goroutine, so a slow or silent client delays no
// one else; Accept returns only connections that passed.
type AuthListener struct {
	ln       net.Listener
	tls      *tls.Config
	token    [sha256.Size]byte
	check    bool
	log      *slog.Logger
	onRefuse func(kind string)

	conns chan net.Conn
	errc  chan error
	done  chan struct{}
	sem   chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	rlog    refuseLog
	timeout time.Duration // a handshake's

	mu      sync.Mutex
	seq     uint64
	pending map[net.Conn]pendingConn
	perIP   map[string]int
	fails   map[string]*rate.Limiter
}

// pendingConn is a connection in its handshake: its address, and its
// place in arrival order (the oldest of an address is evicted first).
type pendingConn struct {
	ip  string
	seq uint64
}

// NewAuthListener starts accepting on ln; onRefuse (may be nil) is
// called with the kind of every refused connection: tls, token, no_token,
// token_backoff (an address past its wrong-token rate) or overload.
func NewAuthListener(ln net.Listener, tlsCfg *tls.Config, token string, log *slog.Logger, onRefuse func(kind string)) *AuthListener {
	return newAuthListener(ln, tlsCfg, token, log, onRefuse, AuthTimeout)
}

// newAuthListener is NewAuthListener with the handshake's time limit.
func newAuthListener(ln net.Listener, tlsCfg *tls.Config, token string, log *slog.Logger, onRefuse func(kind string), timeout time.Duration) *AuthListener {
	if log == nil {
		log = slog.Default()
	}
	l := &AuthListener{ln: ln, tls: tlsCfg, log: log, check: token != "", onRefuse: onRefuse, timeout: timeout,
		rlog:  refuseLog{every: rate.Sometimes{Interval: time.Second}},
		token: sha256.Sum256([]byte(token)),
		conns: make(chan net.Conn), errc: make(chan error, 1), done: make(chan struct{}),
		sem: make(chan struct{}, maxPendingAuth), pending: map[net.Conn]pendingConn{}, perIP: map[string]int{},
		fails: map[string]*rate.Limiter{}}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *AuthListener) acceptLoop() {
	defer l.wg.Done()
	var backoff server.AcceptBackoff
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if server.AcceptRetryable(err) {
				// Out of descriptors passes as connections close; the
				// server behind keeps waiting on Accept meanwhile.
				time.Sleep(backoff.Next())
				continue
			}
			select {
			case l.errc <- err:
			case <-l.done:
			}
			return
		}
		backoff.Reset()
		ip := remoteIP(nc)
		if l.backingOff(ip) {
			l.refuse(nc, "token_backoff", "too many wrong tokens from "+ip)
			continue
		}
		if !l.admit(ip) {
			l.refuse(nc, "overload", "too many connections in their handshake")
			continue
		}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			<-l.sem
			nc.Close()
			return
		default:
		}
		if l.perIP[ip] >= maxPendingAuthPerIP {
			l.mu.Unlock()
			<-l.sem
			l.refuse(nc, "overload", "too many connections in their handshake from "+ip)
			continue
		}
		l.perIP[ip]++
		l.seq++
		l.pending[nc] = pendingConn{ip: ip, seq: l.seq}
		l.mu.Unlock()
		l.wg.Add(1)
		go l.handshake(nc)
	}
}

// admit takes a handshake place for a connection from ip: a free one, or
// the oldest of the address holding the most places when ip holds fewer
// (that connection is closed, and its handshake gives the place back).
// It returns false when neither is possible or the listener is closed.
func (l *AuthListener) admit(ip string) bool {
	select {
	case l.sem <- struct{}{}:
		return true
	default:
	}
	l.mu.Lock()
	var victim net.Conn
	var vp pendingConn
	most := l.perIP[ip] + 1
	for c, p := range l.pending {
		n := l.perIP[p.ip]
		if n > most || (n == most && victim != nil && p.ip == vp.ip && p.seq < vp.seq) {
			victim, vp, most = c, p, n
		}
	}
	l.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.Close()
	select {
	case l.sem <- struct{}{}:
		return true
	case <-l.done:
		return false
	}
}

// backingOff tells whether ip is past its wrong-token rate.
func (l *AuthListener) backingOff(ip string) bool {
	if !l.check {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.fails[ip]
	return lim != nil && lim.Tokens() < 1
}

// failed counts a wrong token from ip.
func (l *AuthListener) failed(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.fails[ip]
	if lim == nil {
		if len(l.fails) >= maxFailAddrs {
			for a, f := range l.fails {
				if f.Tokens() >= authFailBurst { // recovered: nothing to remember
					delete(l.fails, a)
				}
			}
			if len(l.fails) >= maxFailAddrs {
				clear(l.fails)
			}
		}
		lim = rate.NewLimiter(authFailRate, authFailBurst)
		l.fails[ip] = lim
	}
	lim.Allow()
}

// refuseLog logs refused connections at most once a second, with the
// number of refusals since the last line (this one included): peers
// choose how many there are.
type refuseLog struct {
	every rate.Sometimes
	n     atomic.Int64
}

func (r *refuseLog) warn(log *slog.Logger, remote, reason string) {
	r.n.Add(1)
	r.every.Do(func() {
		log.Warn("hatkv: connection refused", "remote", remote, "reason", reason, "count", r.n.Swap(0))
	})
}

// refuse closes a connection; its log line is rate-limited (refuseLog).
func (l *AuthListener) refuse(nc net.Conn, kind, reason string) {
	l.rlog.warn(l.log, nc.RemoteAddr().String(), reason)
	if l.onRefuse != nil {
		l.onRefuse(kind)
	}
	nc.Close()
}

func (l *AuthListener) handshake(raw net.Conn) {
	defer l.wg.Done()
	defer func() { <-l.sem }()
	passed := false
	defer func() {
		ip := remoteIP(raw)
		l.mu.Lock()
		delete(l.pending, raw)
		if l.perIP[ip]--; l.perIP[ip] <= 0 {
			delete(l.perIP, ip)
		}
		l.mu.Unlock()
		if !passed {
			raw.Close()
		}
	}()
	_ = raw.SetDeadline(time.Now().Add(l.timeout))
	c := raw
	if l.tls != nil {
		tc := tls.Server(raw, l.tls)
		if err := tc.Handshake(); err != nil {
			l.refuse(raw, "tls", "TLS handshake: "+err.Error())
			return
		}
		c = tc
	}
	if l.check {
		if kind, reason := l.checkToken(c, remoteIP(raw)); reason != "" {
			l.refuse(raw, kind, reason)
			return
		}
	}
	_ = raw.SetDeadline(time.Time{})
	select {
	case l.conns <- c:
		passed = true
	case <-l.done:
	}
}

// checkToken reads the preamble and answers it; reason "" means accepted.
// A wrong token from ip is counted before it is answered: a guesser that
// dials again as soon as it reads the answer must find it counted.
func (l *AuthListener) checkToken(c net.Conn, ip string) (kind, reason string) {
	var hdr [len(tokenMagic) + 2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return "no_token", "no token preamble: " + err.Error()
	}
	if string(hdr[:len(tokenMagic)]) != tokenMagic {
		// A plain Thrift client or a hatkv client without --token: it
		// does not speak the preamble, so it gets no answer.
		return "no_token", "no token (client without --token, or not a hatkv client)"
	}
	n := int(binary.BigEndian.Uint16(hdr[len(tokenMagic):]))
	if n > maxTokenLen {
		l.failed(ip)
		_, _ = c.Write([]byte{authRefused})
		return "token", fmt.Sprintf("token of %d bytes", n)
	}
	tok := make([]byte, n)
	if _, err := io.ReadFull(c, tok); err != nil {
		l.failed(ip)
		return "token", "short token: " + err.Error()
	}
	sum := sha256.Sum256(tok)
	if subtle.ConstantTimeCompare(sum[:], l.token[:]) != 1 {
		l.failed(ip)
		_, _ = c.Write([]byte{authRefused})
		return "token", "wrong token"
	}
	if _, err := c.Write([]byte{authOK}); err != nil {
		l.failed(ip)
		return "token", "writing the answer: " + err.Error()
	}
	return "", ""
}

func remoteIP(c net.Conn) string {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return c.RemoteAddr().String()
}

// Accept returns the next connection that passed TLS and the token.
func (l *AuthListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errc:
		l.errc <- err // every later Accept fails the same way
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the connections still in their
// handshake.
func (l *AuthListener) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for c := range l.pending {
			c.Close()
		}
		l.mu.Unlock()
		err = l.ln.Close()
		l.wg.Wait()
	})
	return err
}

// Addr is the underlying listener's address.
func (l *AuthListener) Addr() net.Addr { return l.ln.Addr() }

// authDialer returns a dialer that runs TLS (tlsCfg != nil) and presents
// the token (token != "") before handing the connection to the client;
// a plain connection is returned as the *net.TCPConn itself, so the
// client keeps its socket fast paths.
func authDialer(tlsCfg *tls.Config, token string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		network, address := wire.Network(addr)
		raw, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		c, err := authenticate(ctx, raw, addr, tlsCfg, token)
		if err != nil {
			raw.Close()
			return nil, err
		}
		return c, nil
	}
}

func authenticate(ctx context.Context, raw net.Conn, addr string, tlsCfg *tls.Config, token string) (net.Conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	} else {
		_ = raw.SetDeadline(time.Now().Add(AuthTimeout))
	}
	c := raw
	if tlsCfg != nil {
		cfg := tlsCfg
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName = wire.ServerName(addr)
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
	}
	if token != "" {
		if len(token) > maxTokenLen {
			return nil, fmt.Errorf("%w: token longer than %d bytes", ErrConfig, maxTokenLen)
		}
		msg := binary.BigEndian.AppendUint16([]byte(tokenMagic), uint16(len(token)))
		if _, err := c.Write(append(msg, token...)); err != nil {
			return nil, fmt.Errorf("sending the token: %w", err)
		}
		var ans [1]byte
		if _, err := io.ReadFull(c, ans[:]); err != nil {
			return nil, fmt.Errorf("waiting for the server to accept the token (does it use TLS, and is it hatkv?): %w", err)
		}
		if ans[0] != authOK {
			return nil, ErrTokenRefused
		}
	}
	_ = raw.SetDeadline(time.Time{})
	return c, nil
}
