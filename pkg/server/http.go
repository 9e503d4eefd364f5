package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Thrift over HTTP.
//
// An HTTP POST carries one or more Thrift messages in its body (what
// Apache's THttpClient sends: one unframed message a request) and gets
// their replies in the response body, content type application/x-thrift.
// The body is served as the byte stream of a connection of its own: the
// same detection (framed or not, binary or compact, THeader), dispatch,
// memory budget and time limits as a TCP connection, with the replies
// collected for the response. Request headers are the calls' incoming
// metadata; the reply headers handlers set become response headers.

// ContentTypeThrift is the content type of Thrift bodies over HTTP.
const ContentTypeThrift = "application/x-thrift"

// HTTPHandler returns an http.Handler serving Thrift over HTTP with the
// server's services, for a team to mount in its own mux. The server
// answers the same requests on its own port (see Serve); it need not
// serve a port for the handler to work. POST only (405 otherwise); a body
// larger than the message size limit (WithLimits) gets 413, one that
// arrives too slowly (WithMinReadRate, WithHandshakeTimeout) 408, bytes
// that are no Thrift 400; after Close or Shutdown, 503; with a message
// limit below the protocol's minimum (WithLimits: what Serve refuses with
// ErrBadOption), 500 saying so, every request. The time limits
// need a ResponseWriter that can set read deadlines
// (http.ResponseController), as net/http's own can.
func (s *Server) HTTPHandler() http.Handler { return httpHandler{s} }

type httpHandler struct{ s *Server }

func (h httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if err := s.opts.checkLimits(); err != nil {
		// A handler has no error to return where it is mounted: it
		// refuses every request, naming the option, and logs it once.
		s.badHTTP.Do(func() { s.log.Error("hatrpc: HTTP handler refuses every request", "err", err) })
		http.Error(w, "hatrpc: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "hatrpc: Thrift over HTTP takes POST requests", http.StatusMethodNotAllowed)
		return
	}
	limit := int64(s.opts.limits.MaxMessageSize) + 4 // a frame length
	if r.ContentLength > limit {
		httpTooLarge(w, limit)
		return
	}
	st := newHTTPStream(r, w, limit)
	c := newConn(s, st)
	st.c = c
	c.cancel() // the request's context replaces the one newConn made
	sc := metadata.NewServerCall(incomingHTTP(r.Header))
	ctx, cancel := context.WithCancel(metadata.NewServerContext(r.Context(), sc))
	defer cancel()
	c.ctx, c.cancel = ctx, func() {
		// The end of the body is the end of the request, not a client
		// gone (which ends r.Context()): its calls run on.
		if !st.endedCleanly() {
			cancel()
		}
	}
	if !s.addConn(c) {
		http.Error(w, "hatrpc: server shutting down", http.StatusServiceUnavailable)
		return
	}
	s.startSweeper()
	s.pool.run(c)
	<-st.done  // reading ended and no call runs
	c.w.Wait() // every reply is in st.out
	// The response stays charged to the memory budget until it is
	// written or its write timed out: a client posting calls with large
	// replies and reading no response held them all, uncounted.
	defer s.budget.release(c, st.held.Load())
	st.mu.Lock()
	st.over = true // the ResponseController is not to be used after this handler
	st.mu.Unlock()

	n, err := st.result()
	why := c.why.Load()
	switch {
	case errors.Is(err, errHTTPReplyLimit), errors.Is(err, errHTTPReplyShare):
		http.Error(w, "hatrpc: "+err.Error(), http.StatusInternalServerError)
	case why == whyShutdown:
		http.Error(w, "hatrpc: server shutting down", http.StatusServiceUnavailable)
	case why == whyHandshake || why == whySlow || why == whyIdle:
		w.Header().Set("Connection", "close")
		http.Error(w, "hatrpc: request body arrived too slowly ("+whyNames[why]+")", http.StatusRequestTimeout)
	case errors.Is(err, proto.ErrSizeLimit):
		httpTooLarge(w, limit)
	case n == 0 && errors.Is(err, io.EOF):
		http.Error(w, "hatrpc: empty request body: want Thrift messages", http.StatusBadRequest)
	case err != nil && !errors.Is(err, io.EOF) && (st.outLen == 0 || !errors.Is(err, proto.ErrInvalidData)):
		// A message the server could not even answer with an exception
		// (garbage, a truncated body, a failed read).
		http.Error(w, "hatrpc: bad Thrift request: "+err.Error(), http.StatusBadRequest)
	default:
		// Every message answered, or bad input answered with a
		// PROTOCOL_ERROR exception the client can decode.
		hd := w.Header()
		for k, v := range sc.Reply() {
			if replyHeaderOK(k, v) {
				hd.Set(k, v)
			}
		}
		hd.Set("Content-Type", ContentTypeThrift)
		hd.Set("Content-Length", strconv.Itoa(st.outLen))
		w.WriteHeader(http.StatusOK)
		st.writeResponse(w, s.opts.writeTimeout)
	}
}

// writeResponse writes the response body within the write timeout, as
// the server's own connections write: net/http sets no write deadline
// unless its server has a WriteTimeout (which would count the handler's
// run too), and a client that reads no response would hold it for as
// long as the TCP connection lives. The deadline is cleared afterwards:
// the next request on the connection must not inherit it.
func (st *httpStream) writeResponse(w http.ResponseWriter, timeout time.Duration) {
	if timeout <= 0 {
		_, _ = st.out.WriteTo(w)
		return
	}
	dl := st.rc.SetWriteDeadline(time.Now().Add(timeout)) == nil
	_, err := st.out.WriteTo(w)
	if err == nil {
		err = st.rc.Flush() // net/http buffers the response's tail
	}
	if dl && err == nil {
		_ = st.rc.SetWriteDeadline(time.Time{})
	}
}

func httpTooLarge(w http.ResponseWriter, limit int64) {
	w.Header().Set("Connection", "close") // the rest of the body is not read
	http.Error(w, fmt.Sprintf("hatrpc: request body larger than %d bytes (the message size limit)", limit), http.StatusRequestEntityTooLarge)
}

// addConn registers a connection made by the server itself (an HTTP
// request), so that the time limits, Shutdown and Close see it.
func (s *Server) addConn(c *conn) bool {
	s.mu.Lock()
	if s.closed || s.shutting.Load() {
		s.mu.Unlock()
		return false
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	s.met.conns.Inc()
	return true
}

// Headers that describe the HTTP connection or body, not the call.
var hopHeaders = map[string]bool{
	"connection": true, "keep-alive": true, "transfer-encoding": true, "te": true, "trailer": true,
	"upgrade": true, "content-length": true, "proxy-connection": true, "proxy-authorization": true,
}

// incomingHTTP makes a request's headers the calls' metadata: keys in
// lower case (HTTP's are case-insensitive, metadata's are not; HatRPC's
// own keys are lower case), repeated ones joined with ", ".
func incomingHTTP(h http.Header) metadata.MD {
	md := make(metadata.MD, len(h))
	for k, vs := range h {
		lk := strings.ToLower(k)
		if !hopHeaders[lk] {
			md[lk] = strings.Join(vs, ", ")
		}
	}
	return md
}

// replyHeaderOK tells whether a handler's reply header can go out as an
// HTTP response header: not one that frames the response, and one HTTP
// can carry.
func replyHeaderOK(k, v string) bool {
	lk := strings.ToLower(k)
	return !hopHeaders[lk] && lk != "content-type" && metadata.ValidHTTPHeader(k, v)
}

// errHTTPReplyLimit: the replies to one request outgrew what a response
// may hold.
var errHTTPReplyLimit = errors.New("replies larger than the message size limit")

// errHTTPReplyShare: the replies to one request outgrew the connection's
// share of the memory budget. A response is sent whole at the end, so
// replies held for it never drain while its calls run: waiting for room
// would wait forever.
var errHTTPReplyShare = errors.New("replies larger than the connection's memory share (WithMemoryBudget)")

// httpStream is the net.Conn a conn serves for one HTTP request: reads
// come from the request body (at most limit bytes), writes go to the
// response, which is sent once the conn finished.
type httpStream struct {
	c      *conn
	body   io.Reader
	rc     *http.ResponseController
	local  net.Addr
	remote net.Addr
	limit  int64

	done chan struct{} // closed once the conn finished
	once sync.Once

	mu     sync.Mutex
	n      int64       // body bytes read
	out    net.Buffers // the response: the replies, in order
	outLen int
	held   atomic.Int64 // budget charged for out (replies admitted and written to it)
	err    error        // why reading ended
	outErr error
	shut   bool // Close was called: no more writes
	over   bool // the handler is returning
}

func newHTTPStream(r *http.Request, w http.ResponseWriter, limit int64) *httpStream {
	st := &httpStream{
		body:   r.Body,
		rc:     http.NewResponseController(w),
		remote: httpAddr(r.RemoteAddr),
		local:  httpAddr(""),
		limit:  limit,
		done:   make(chan struct{}),
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		st.local = a
	}
	return st
}

type httpAddr string

func (a httpAddr) Network() string { return "http" }
func (a httpAddr) String() string  { return string(a) }

// errBodyTooLarge: more body than the limit; a size error like an
// oversized frame.
var errBodyTooLarge = fmt.Errorf("server: HTTP request body too large: %w", proto.ErrSizeLimit)

func (st *httpStream) Read(p []byte) (int, error) {
	st.mu.Lock()
	left := st.limit + 1 - st.n // one byte more tells a body over the limit
	st.mu.Unlock()
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := st.body.Read(p)
	st.mu.Lock()
	st.n += int64(n)
	over := st.n > st.limit
	st.mu.Unlock()
	if over {
		return 0, errBodyTooLarge
	}
	return n, err
}

func (st *httpStream) Write(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.shut {
		return 0, net.ErrClosed
	}
	if int64(st.outLen+len(p)) > st.limit {
		st.outErr = errHTTPReplyLimit
		return 0, errHTTPReplyLimit
	}
	// Each reply is copied once into a buffer of its size: a
	// bytes.Buffer doubling to hold 11 MB replies made up to 3 times
	// their size in garbage, which a server at a high GOGC keeps.
	if n := len(st.out); n > 0 && cap(st.out[n-1])-len(st.out[n-1]) >= len(p) {
		st.out[n-1] = append(st.out[n-1], p...)
	} else {
		st.out = append(st.out, append(make([]byte, 0, max(len(p), 512)), p...))
	}
	st.outLen += len(p)
	return len(p), nil
}

// Close is the conn's last act once reading ended and no call runs
// (maybeFinish), or the first of an abort (the server's Close, a failed
// write: c.mu may be held), which must also end a body read that waits
// for the client.
func (st *httpStream) Close() error {
	st.mu.Lock()
	st.shut = true
	st.mu.Unlock()
	if !st.c.readEnded.Load() || st.c.inflight.Load() > 0 {
		return st.SetReadDeadline(time.Unix(1, 0))
	}
	st.once.Do(func() { close(st.done) })
	return nil
}

// SetReadDeadline is how the time limits end a body read (expire, drain).
// Once the handler returns it does nothing: the connection under the
// ResponseController may be serving the next request by then.
func (st *httpStream) SetReadDeadline(t time.Time) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.over {
		return nil
	}
	return st.rc.SetReadDeadline(t)
}

func (st *httpStream) SetDeadline(t time.Time) error    { return st.SetReadDeadline(t) }
func (st *httpStream) SetWriteDeadline(time.Time) error { return nil }
func (st *httpStream) LocalAddr() net.Addr              { return st.local }
func (st *httpStream) RemoteAddr() net.Addr             { return st.remote }

// result returns why reading ended and how many body bytes were read.
func (st *httpStream) result() (int64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.outErr != nil {
		return st.n, st.outErr
	}
	return st.n, st.err
}

// endedCleanly tells a body read to its end by a conn not aborted.
func (st *httpStream) endedCleanly() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.shut && st.err == io.EOF
}

// overHTTP tells a conn serving an HTTP request body: no HatRPC upgrade,
// no further HTTP detection.
func (c *conn) overHTTP() bool {
	_, ok := c.nc.(*httpStream)
	return ok
}

// written ends the charge of a reply of n bytes once written: on a
// connection it is in the kernel's hands, while an HTTP request keeps it
// in its response (charged until the response is written).
func (c *conn) written(n int64, err error) {
	if st, ok := c.nc.(*httpStream); ok && err == nil {
		st.held.Add(n)
		return
	}
	c.s.budget.release(c, n)
}

// httpOverShare fails the HTTP request whose replies do not fit c's
// share (admitReply).
func (c *conn) httpOverShare() {
	st := c.nc.(*httpStream)
	st.mu.Lock()
	if st.outErr == nil {
		st.outErr = errHTTPReplyShare
	}
	// Shut before the abort cancels: a body read to its end counts as a
	// clean end (endedCleanly), whose calls run on, and the replies
	// behind this one would wait for their turn until the client left.
	st.shut = true
	st.mu.Unlock()
	c.checkWrite(errHTTPReplyShare)
}

// httpReadEnd notes why an HTTP request body's reading ended, for the
// response's status.
func (c *conn) httpReadEnd(err error) {
	if st, ok := c.nc.(*httpStream); ok {
		st.mu.Lock()
		st.err = err
		st.mu.Unlock()
	}
}

// HTTP requests on the server's own port.

// httpMethods are the request methods that make a connection's first
// bytes an HTTP request. As a frame length their first four bytes would
// be over 1 GiB, which no Thrift stream sends.
var httpMethods = []string{"POST ", "GET ", "HEAD ", "PUT ", "DELETE ", "OPTIONS ", "PATCH "}

// startsHTTP tells whether the connection's first bytes are an HTTP
// request line. It waits for more than one byte only when the first is
// an upper-case letter, which no Thrift message starts with.
func (c *conn) startsHTTP() bool {
	if c.overHTTP() {
		return false
	}
	b, err := c.br.Peek(1)
	if err != nil || b[0] < 'D' || b[0] > 'P' {
		return false
	}
	b, _ = c.br.Peek(8) // every request line is longer
	for _, m := range httpMethods {
		if bytes.HasPrefix(b, []byte(m)) {
			return true
		}
	}
	return false
}

// serveHTTP serves the connection as HTTP/1.1 with HTTPHandler until it
// closes (keep-alive: any number of requests). The HTTP server's own
// limits take over from the connection's: the request line and headers
// within the handshake timeout, idle connections closed after the idle
// timeout; each request body is a connection of its own to the time
// limits and the memory budget.
func (c *conn) serveHTTP() error {
	c.busy() // the sweeper leaves this connection to the HTTP server
	hc := &httpNetConn{Conn: c.nc, c: c, r: c.br, closed: make(chan struct{})}
	srv := &http.Server{
		Handler:           c.s.HTTPHandler(),
		ReadHeaderTimeout: c.s.opts.handshakeTimeout,
		IdleTimeout:       c.s.opts.idleTimeout,
		ErrorLog:          slog.NewLogLogger(c.s.log.Handler(), slog.LevelDebug),
	}
	_ = srv.Serve(&oneConnListener{c: hc})
	return io.EOF // the client's connection ended
}

// httpNetConn is the connection the HTTP server reads: the bytes
// detection peeked at first.
type httpNetConn struct {
	net.Conn
	c      *conn
	r      io.Reader
	closed chan struct{}
	once   sync.Once
}

func (h *httpNetConn) Read(p []byte) (int, error) { return h.r.Read(p) }

// SetReadDeadline keeps a draining connection's deadline in the past:
// the HTTP server sets its own before every request, which would undo
// the one drain set. Under c.mu, so that it comes before drain's or sees
// draining.
func (h *httpNetConn) SetReadDeadline(t time.Time) error {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.c.draining {
		t = time.Unix(1, 0)
	}
	return h.Conn.SetReadDeadline(t)
}

func (h *httpNetConn) SetDeadline(t time.Time) error {
	if err := h.SetReadDeadline(t); err != nil {
		return err
	}
	return h.Conn.SetWriteDeadline(t)
}

func (h *httpNetConn) Close() error {
	h.once.Do(func() { close(h.closed) })
	return h.Conn.Close()
}

// oneConnListener hands the HTTP server one connection, then makes it
// wait until that connection closed: Serve returns only then.
type oneConnListener struct {
	c    *httpNetConn
	done bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if !l.done {
		l.done = true
		return l.c, nil
	}
	<-l.c.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }
