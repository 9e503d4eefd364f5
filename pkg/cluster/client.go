// Package cluster is a HatRPC client over many servers: a Resolver names
// them, a Balancer spreads calls over the live ones, each server has its
// own client.Conn (so its own TCP connections and fast-path lanes), a
// circuit breaker (sony/gobreaker) and a health state; a server whose
// connection breaks is taken out and probed back in. Calls to functions
// hinted `idempotent` are sent again, with exponential backoff and jitter
// (cenkalti/backoff), after a connection failure or a timeout, within the
// caller's deadline; other calls never are once they may have reached a
// server. A *Client is a client.Caller, so generated clients take it as
// they take a *client.Conn. See docs/design/cluster.md.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/sony/gobreaker/v2"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/internal/retrypolicy"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
)

// Client calls a service on many servers; safe for concurrent use.
type Client struct {
	o       options
	r       Resolver
	servers atomic.Pointer[[]*endpoint] // sorted by address; replaced, never edited
	update  sync.Mutex                  // serializes refreshes

	reuses bool // every Conn makes client.Reuser's promise (no interceptors)

	life   sync.Mutex // guards closed and wg.Add; taken last, after any endpoint's mu
	closed atomic.Bool
	wg     sync.WaitGroup
	ctx    context.Context // ends at Close: probes, refreshes, drains
	cancel context.CancelFunc
}

var (
	_ client.Caller = (*Client)(nil)
	_ client.Reuser = (*Client)(nil)
)

// ReusesValues reports that c keeps nothing of a call once it returns, so
// generated borrowed calls reuse their values instead of allocating them:
// every attempt, retries included, runs on the caller's goroutine through
// a Conn built from the same options, and a Conn keeps nothing unless it
// has interceptors (which may keep what they are given).
func (c *Client) ReusesValues() bool { return c.reuses }

// Dial resolves r, connects to every server it names (concurrently,
// within ctx) and returns a Client once at least one answered; the
// others start out down and are probed. It fails when none answers.
func Dial(ctx context.Context, r Resolver, opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	addrs, err := r.Resolve(ctx)
	if err != nil {
		return nil, err
	}
	addrs = normalize(addrs)
	if len(addrs) == 0 {
		return nil, ErrNoAddresses
	}
	c := &Client{o: o, r: r, reuses: client.ReusesValuesWith(o.conn...)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	eps := make([]*endpoint, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		e := newEndpoint(c, a)
		eps[i] = e
		wg.Go(func() {
			conn, err := client.Dial(ctx, a, o.conn...)
			if err != nil {
				errs[i] = err
				return
			}
			e.conn = conn
			e.up.Store(true)
		})
	}
	wg.Wait()
	c.servers.Store(&eps)
	if !slices.ContainsFunc(eps, func(e *endpoint) bool { return e.up.Load() }) {
		c.cancel()
		return nil, fmt.Errorf("%w: none of %d answered: %w", ErrNoServer, len(eps), errors.Join(errs...))
	}
	for i, e := range eps {
		if errs[i] != nil {
			e.mu.Lock()
			e.lastErr = errs[i]
			e.startProbeLocked()
			e.mu.Unlock()
		}
	}
	c.goLocked(c.discover)
	return c, nil
}

// goLocked runs fn on its own goroutine until Close, unless the Client is
// closed already.
func (c *Client) goLocked(fn func(ctx context.Context)) bool {
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed.Load() {
		return false
	}
	c.wg.Go(func() { fn(c.ctx) })
	return true
}

// Close stops probing and refreshing and closes every server's Conn;
// calls in flight fail with client.ErrConnClosed.
func (c *Client) Close() error {
	c.life.Lock()
	if c.closed.Swap(true) {
		c.life.Unlock()
		return nil
	}
	c.life.Unlock()
	c.cancel()
	c.wg.Wait()
	for _, e := range *c.servers.Load() {
		e.mu.Lock()
		e.removed = true
		e.up.Store(false)
		conn := e.conn
		e.mu.Unlock()
		if conn != nil {
			conn.Close()
		}
	}
	return nil
}

func (c *Client) refreshLoop(ctx context.Context) {
	t := time.NewTicker(c.o.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, min(c.o.refresh, 10*time.Second))
		addrs, err := c.r.Resolve(rctx)
		cancel()
		// A failed or empty answer keeps the servers known: a DNS outage
		// must not take a working service away from its clients.
		if err == nil && len(addrs) > 0 {
			c.setServers(normalize(addrs))
		}
	}
}

// setServers makes addrs the server list: known servers keep their state,
// new ones start down and are probed in, dropped ones finish the calls
// they have in flight and are closed.
func (c *Client) setServers(addrs []string) {
	c.update.Lock()
	defer c.update.Unlock()
	cur := *c.servers.Load()
	if slices.EqualFunc(cur, addrs, func(e *endpoint, a string) bool { return e.addr == a }) {
		return
	}
	next := make([]*endpoint, 0, len(addrs))
	for _, a := range addrs {
		i := slices.IndexFunc(cur, func(e *endpoint) bool { return e.addr == a })
		if i >= 0 {
			next = append(next, cur[i])
			continue
		}
		e := newEndpoint(c, a)
		e.mu.Lock()
		e.startProbeLocked()
		e.mu.Unlock()
		next = append(next, e)
	}
	c.servers.Store(&next)
	for _, e := range cur {
		if !slices.Contains(next, e) && !c.goLocked(e.close) {
			e.close(c.ctx) // closing: ctx has ended, so no wait
		}
	}
}

// ServerStatus describes one server of a Client.
type ServerStatus struct {
	Addr     string
	Up       bool         // connected; calls may go there if the breaker allows
	Breaker  BreakerState // its circuit breaker
	InFlight int64        // calls sent there, not yet answered
	Calls    uint64       // attempts sent there since it joined
	Err      error        // why it is down (nil when up)
}

// Servers reports every server's state, sorted by address.
func (c *Client) Servers() []ServerStatus {
	eps := *c.servers.Load()
	out := make([]ServerStatus, len(eps))
	for i, e := range eps {
		e.mu.Lock()
		err := e.lastErr
		e.mu.Unlock()
		up := e.up.Load()
		if up {
			err = nil
		}
		out[i] = ServerStatus{Addr: e.addr, Up: up, Breaker: breakerState(e.cb.State()),
			InFlight: e.inflight.Load(), Calls: e.calls.Load(), Err: err}
	}
	return out
}

// pick returns an available server not in excl, else an available one in
// excl (a retry on the server that failed beats no retry), else nil.
func (c *Client) pick(excl []*endpoint) *endpoint {
	all := *c.servers.Load()
	var buf [16]*endpoint
	avail := buf[:0]
	for _, e := range all {
		if !slices.Contains(excl, e) && e.available() {
			avail = append(avail, e)
		}
	}
	if len(avail) == 0 {
		for _, e := range excl {
			if e.available() {
				avail = append(avail, e)
			}
		}
	}
	if len(avail) == 0 {
		return nil
	}
	return c.o.balancer.pick(avail)
}

// Call invokes m on one of the servers (see the package documentation for
// which, and when it is sent again).
func (c *Client) Call(ctx context.Context, m *client.Method, args, result proto.Struct) error {
	return c.call(ctx, m, args, result, nil)
}

// CallBorrowed is Call with the result read in place while use runs (see
// client.Conn.CallBorrowed); use runs once, for the attempt that succeeded.
func (c *Client) CallBorrowed(ctx context.Context, m *client.Method, args, result proto.Struct, use func() error) error {
	return c.call(ctx, m, args, result, use)
}

func (c *Client) call(ctx context.Context, m *client.Method, args, result proto.Struct, use func() error) error {
	if c.closed.Load() {
		return &client.ConnError{Op: "call", Err: errors.New("cluster Client closed")}
	}
	idempotent, budget := false, 0
	if m.Hints != nil {
		idempotent, budget = m.Hints.Client.Idempotent, m.Hints.Client.RetryBudget()
		// The timeout hint bounds the call, retries included, as a
		// Conn bounds its one attempt; the earlier of it and the caller's
		// deadline applies.
		if d := m.Hints.Client.Timeout; d > 0 {
			if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > d {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, d)
				defer cancel()
			}
		}
	}
	var (
		exclBuf  [4]*endpoint
		excl     = exclBuf[:0] // servers this call failed on or was refused by
		refused  int           // refusals in this round
		rounds   int           // retries spent: failed attempts, or rounds no server took
		attempts int           // attempts that may have reached a server
		bo       *backoff.ExponentialBackOff
		last     *endpoint
		lastErr  error
	)
	if err := ctx.Err(); err != nil {
		// Ended before anything was sent: say so, not "failed on".
		return &CallError{Method: m.Service + "." + m.Name, Idempotent: idempotent, Err: err, kind: err}
	}
	fail := func(kind error) error {
		if lastErr == nil {
			lastErr = kind
		}
		return &CallError{Method: m.Service + "." + m.Name, Addr: addrOf(last), Attempts: attempts,
			Idempotent: idempotent, Err: lastErr, kind: kind}
	}
	for {
		taken := false // a server took the call this round (and failed it)
		if e := c.pick(excl); e != nil {
			sent, useErr, err := c.attempt(ctx, e, m, args, result, use)
			if err == nil || useErr || !retriable(err) {
				return err // success, or the function's own answer, as from a Conn
			}
			if !slices.Contains(excl, e) {
				excl = append(excl, e)
			}
			if sent {
				taken = true
				attempts++
				last, lastErr = e, err
				if budget == 0 {
					return fail(ErrNotRetried)
				}
			} else {
				// The function did not run: try another server at once,
				// whatever the hints, up to one refusal per server.
				if attempts == 0 && !errors.Is(err, errDown) {
					last, lastErr = e, err
				}
				refused++
				if refused <= len(*c.servers.Load()) {
					continue
				}
			}
		}
		// The round ended: an attempt failed, every server refused, or
		// none is available. Wait and go again, within the budget and
		// the deadline.
		switch {
		case ctx.Err() != nil:
			return fail(ctx.Err())
		case rounds >= budget && !taken:
			return fail(ErrNoServer)
		case rounds >= budget:
			return fail(ErrRetriesExhausted)
		}
		rounds++
		refused = 0
		if bo == nil {
			bo = c.o.retry.New()
		}
		if err := retrypolicy.Pause(ctx, bo); err != nil {
			return fail(err)
		}
	}
}

func (c *Client) attempt(ctx context.Context, e *endpoint, m *client.Method, args, result proto.Struct, use func() error) (bool, bool, error) {
	if c.o.attemptTO > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.attemptTO)
		defer cancel()
	}
	return e.attempt(ctx, m, args, result, use)
}

// retriable reports whether err is the server's or the cluster's failure
// rather than the function's own answer: a server that answers
// codes.Unavailable (pkg/status: "server busy", a draining handler) is
// one, and another server may take the call.
func retriable(err error) bool {
	return serverFault(err) || errors.Is(err, errDown) ||
		errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) ||
		status.Code(err) == codes.Unavailable
}

func addrOf(e *endpoint) string {
	if e == nil {
		return ""
	}
	return e.addr
}
