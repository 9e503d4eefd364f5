package sasl

import (
	"fmt"
	"net"
	"net/http"
	"sync"
)

// HTTP returns the listener of the connections that start with an HTTP
// request line (Thrift over HTTP). The caller serves it, with BasicAuth in
// front of the Thrift handler; closing it refuses HTTP connections from
// then on.
func (l *Listener) HTTP() net.Listener { return l.http }

type httpListener struct {
	l    *Listener
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (h *httpListener) Accept() (net.Conn, error) {
	select {
	case c := <-h.ch:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	case <-h.l.done:
		return nil, net.ErrClosed
	}
}

func (h *httpListener) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *httpListener) Addr() net.Addr { return h.l.Addr() }

// BasicAuth is HiveServer2's PLAIN over HTTP (hive.server2.transport.mode
// http): each request carries the user and password as Basic credentials
// (impyla use_http_transport with auth_mechanism PLAIN, PyHive
// scheme='http', gohive TransportMode "http" with "NONE"), checked by
// auth before next serves it. Wrong credentials get 401 with a
// WWW-Authenticate challenge and the reason in the body; so do missing
// ones, unless optional (the listener takes NOSASL clients too: a request
// without credentials is their HTTP form).
func BasicAuth(next http.Handler, auth Authenticator, optional bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		switch {
		case !ok && r.Header.Get("Authorization") != "":
			unauthorized(w, fmt.Sprintf("%v: the Authorization header is not Basic credentials", ErrMalformed))
		case !ok && !optional:
			unauthorized(w, "sasl: this server requires a user and password (HTTP Basic credentials)")
		case ok && !auth(r.Context(), user, pass):
			unauthorized(w, fmt.Sprintf("%v for user %q", ErrUnauthorized, user))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="HiveServer2", charset="UTF-8"`)
	http.Error(w, msg, http.StatusUnauthorized)
}
