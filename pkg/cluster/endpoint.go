package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// BreakerState is the state of a server's circuit breaker.
type BreakerState int

const (
	BreakerClosed   BreakerState = iota // calls flow
	BreakerHalfOpen                     // a few trial calls (or probes) decide
	BreakerOpen                         // no calls until BreakerSettings.OpenFor has passed
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "BreakerState(?)"
}

func breakerState(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	case gobreaker.StateOpen:
		return BreakerOpen
	}
	return BreakerClosed
}

// endpoint is one server: its own client.Conn (with the Conn's extra TCP
// connections and fast-path lanes), its breaker and its health.
//
// Health and breaker answer different questions. A call that breaks the
// connection (the server died, a network cut) takes the server out at
// once, and a prober dials it back in; the breaker counts failed calls
// and probes alike, so a server that keeps failing (or that accepts
// connections but times out) is also left alone for OpenFor, and probes
// stop while it is open.
type endpoint struct {
	addr     string
	c        *Client
	cb       *gobreaker.CircuitBreaker[struct{}]
	up       atomic.Bool
	inflight atomic.Int64
	calls    atomic.Uint64 // attempts sent here

	mu      sync.Mutex
	conn    *client.Conn // nil until the first successful dial
	probing bool
	removed bool  // the resolver no longer lists it; see Client.update
	lastErr error // why it went down
}

func newEndpoint(c *Client, addr string) *endpoint {
	e := &endpoint{addr: addr, c: c}
	b := c.o.breaker
	observe := c.o.onStateChange
	e.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        addr,
		MaxRequests: b.HalfOpenCalls,
		Timeout:     b.OpenFor,
		ReadyToTrip: func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= b.Failures },
		IsSuccessful: func(err error) bool {
			return !serverFault(err)
		},
		// The caller gave up, or the call's deadline passed before it was
		// sent: that says nothing about the server.
		IsExcluded: func(err error) bool {
			return errors.Is(err, context.Canceled) || errors.Is(err, client.ErrNotSent)
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			if observe != nil {
				observe(name, breakerState(from), breakerState(to))
			}
		},
	})
	return e
}

// serverFault reports whether err says something about the server's
// health: the connection broke or could not be made, or the call timed
// out. Exceptions and application errors mean the server is working.
func serverFault(err error) bool {
	return errors.Is(err, client.ErrConnClosed) || errors.Is(err, context.DeadlineExceeded)
}

// notSent reports whether err proves the request never left the client:
// the connection could not be (re)opened, the Conn was already closed, or
// the call's context ended before it was sent (client.ErrNotSent). Such a
// call did not run anywhere, so it may go to another server whatever its
// hints say, and it is not counted as an attempt.
func notSent(err error) bool {
	if err == nil {
		return false // without a heap cell for ce, which errors.As would take
	}
	if errors.Is(err, client.ErrNotSent) {
		return true
	}
	var ce *client.ConnError
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Op {
	case "dial", "tls", "handshake", "call":
		return true
	}
	return false
}

func (e *endpoint) available() bool {
	return e.up.Load() && e.cb.State() != gobreaker.StateOpen
}

// errDown is an attempt on a server that went down between the pick and
// the attempt; the call goes elsewhere.
var errDown = errors.New("cluster: server is down")

// attempt sends one call to e. sent is false when the request surely
// never reached the server (breaker refused, no connection, dial failed).
// useErr is use's own error: the call itself succeeded.
func (e *endpoint) attempt(ctx context.Context, m *client.Method, args, result proto.Struct, use func() error) (sent bool, useErr bool, err error) {
	// Execute rather than the two-step breaker's Allow: Allow returns a
	// closure, an allocation on every call, where this one stays on the
	// stack. The breaker sees the call's error, nil when only use failed,
	// and context.Canceled (neither success nor failure) when e went down.
	ran, down := false, false
	var conn *client.Conn
	_, berr := e.cb.Execute(func() (struct{}, error) {
		ran = true
		e.mu.Lock()
		conn = e.conn
		e.mu.Unlock()
		if conn == nil || !e.up.Load() {
			down = true
			return struct{}{}, context.Canceled
		}
		e.inflight.Add(1)
		e.calls.Add(1)
		if use != nil {
			u := getUseTrack(use, e.c.reuses)
			err = conn.CallBorrowed(ctx, m, args, result, u.run)
			useErr = u.used && err != nil
			putUseTrack(u)
		} else {
			err = conn.Call(ctx, m, args, result)
		}
		e.inflight.Add(-1)
		if useErr {
			return struct{}{}, nil
		}
		return struct{}{}, err
	})
	switch {
	case !ran:
		return false, false, berr
	case down:
		return false, false, errDown
	case useErr:
		return true, true, err
	}
	if errors.Is(err, client.ErrConnClosed) {
		e.fail(conn, err)
	}
	return !notSent(err), false, err
}

// fail takes e out after conn broke, and starts probing it, unless conn
// is no longer e's (a prober replaced it already) or e was removed.
func (e *endpoint) fail(conn *client.Conn, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != conn || e.removed {
		return
	}
	e.up.Store(false)
	e.lastErr = err
	e.startProbeLocked()
}

func (e *endpoint) startProbeLocked() {
	if e.probing || e.removed {
		return
	}
	if !e.c.goLocked(e.probe) {
		return
	}
	e.probing = true
}

// probe dials e until a new Conn completes its handshake, pausing by the
// probe backoff between tries; each try counts for the breaker, and while
// the breaker is open no try is made. The new Conn replaces the broken one,
// whose pending calls have failed already.
func (e *endpoint) probe(ctx context.Context) {
	bo := e.c.o.probe.New()
	for {
		t := time.NewTimer(bo.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			e.mu.Lock()
			e.probing = false
			e.mu.Unlock()
			return
		case <-t.C:
		}
		e.mu.Lock()
		removed := e.removed
		if removed {
			e.probing = false
		}
		e.mu.Unlock()
		if removed {
			return
		}
		var conn *client.Conn
		dialed := false
		_, err := e.cb.Execute(func() (c struct{}, err error) {
			dialed = true
			conn, err = client.Dial(ctx, e.addr, e.c.o.conn...)
			return c, err
		})
		if !dialed {
			continue // the breaker is open: no try
		}
		if err != nil {
			e.mu.Lock()
			e.lastErr = err
			e.mu.Unlock()
			continue
		}
		e.mu.Lock()
		old := e.conn
		e.probing = false
		if e.removed {
			e.mu.Unlock()
			conn.Close()
			return
		}
		e.conn = conn
		e.lastErr = nil
		e.up.Store(true)
		e.mu.Unlock()
		if old != nil {
			old.Close()
		}
		return
	}
}

// close shuts e's Conn once its calls in flight have finished (or ctx
// ends): the resolver dropped e, but calls already sent there still get
// their replies.
func (e *endpoint) close(ctx context.Context) {
	e.mu.Lock()
	e.removed = true
	e.up.Store(false)
	conn := e.conn
	e.mu.Unlock()
	if conn == nil {
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for e.inflight.Load() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	conn.Close()
}

// useTrack tells whether an attempt got as far as its use (then an error
// is the function's own answer, not the server's). Pooled with its method
// value bound once: a closure per attempt was an allocation of every
// borrowed call made through a Client.
type useTrack struct {
	use    func() error
	used   bool
	pooled bool
	run    func() error
}

func newUseTrack() *useTrack {
	u := &useTrack{}
	u.run = func() error { u.used = true; return u.use() }
	return u
}

var useTracks = sync.Pool{New: func() any { return newUseTrack() }}

// getUseTrack pools only for Conns that make client.Reuser's promise:
// with interceptors a Conn may still hold run after the call, and a
// pooled tracker would by then serve another call.
func getUseTrack(use func() error, pool bool) *useTrack {
	var u *useTrack
	if pool {
		u = useTracks.Get().(*useTrack)
	} else {
		u = newUseTrack()
	}
	u.use, u.used, u.pooled = use, false, pool
	return u
}

// putUseTrack drops the caller's use before pooling: a Client keeps
// nothing of a call once it returns (client.Reuser).
func putUseTrack(u *useTrack) {
	if u.pooled {
		u.use = nil
		useTracks.Put(u)
	}
}
