package cluster

import (
	"time"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/internal/retrypolicy"
)

// Option configures a Client.
type Option func(*options)

type options struct {
	conn          []client.Option
	balancer      Balancer
	refresh       time.Duration
	retry         Backoff
	probe         Backoff
	attemptTO     time.Duration
	breaker       BreakerSettings
	onStateChange func(addr string, from, to BreakerState)
}

// Backoff shapes an exponential backoff (the same type as client.Backoff):
// the first pause is Initial, each next one Multiplier times longer up to
// Max, every pause randomized by ±Jitter of itself (so clients that
// failed together do not come back in step).
type Backoff = retrypolicy.Backoff

// BreakerSettings configures the circuit breaker every server gets.
type BreakerSettings struct {
	// Failures is how many consecutive failed calls or probes open the
	// breaker (default 5).
	Failures uint32
	// OpenFor is how long an open breaker refuses calls before it lets
	// HalfOpenCalls trial calls through (default 5s).
	OpenFor time.Duration
	// HalfOpenCalls is how many trial calls a half-open breaker admits;
	// that many successes in a row close it, one failure opens it again
	// (default 1).
	HalfOpenCalls uint32
}

// Defaults. Retries start fast (a killed server's calls fail in
// microseconds and another server is usually ready at once) and stay well
// under a typical deadline; probes back off to a few seconds so a server
// that stays down costs its clients little.
var (
	DefaultRetryBackoff = retrypolicy.DefaultBackoff
	DefaultProbeBackoff = Backoff{Initial: 50 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2, Jitter: 0.2}
	DefaultBreaker      = BreakerSettings{Failures: 5, OpenFor: 5 * time.Second, HalfOpenCalls: 1}
)

// DefaultRefresh is how often a Client asks its Resolver again.
const DefaultRefresh = 30 * time.Second

func defaultOptions() options {
	return options{
		conn:     []client.Option{client.WithoutRetries()}, // the Client retries, across servers
		balancer: RoundRobin(),
		refresh:  DefaultRefresh,
		retry:    DefaultRetryBackoff,
		probe:    DefaultProbeBackoff,
		breaker:  DefaultBreaker,
	}
}

// WithConnOptions passes opts to client.Dial for every server's Conn
// (framing, TLS, interceptors, lanes, timeouts, ...). Interceptors run
// once per attempt.
func WithConnOptions(opts ...client.Option) Option {
	return func(o *options) { o.conn = append(o.conn, opts...) }
}

// WithBalancer picks how calls spread over the servers (default RoundRobin).
func WithBalancer(b Balancer) Option {
	return func(o *options) {
		if !b.p2c && b.next == nil {
			b = RoundRobin() // the zero Balancer
		}
		o.balancer = b
	}
}

// WithRefresh sets how often the Resolver is asked again (default 30s;
// 0 or less: only once, at Dial). A Watcher is not asked again: it
// pushes every change.
func WithRefresh(d time.Duration) Option { return func(o *options) { o.refresh = d } }

// WithRetryBackoff shapes the pauses between attempts of an idempotent call.
func WithRetryBackoff(b Backoff) Option { return func(o *options) { o.retry = b } }

// WithProbeBackoff shapes the pauses between reconnection attempts to a
// server that failed.
func WithProbeBackoff(b Backoff) Option { return func(o *options) { o.probe = b } }

// WithAttemptTimeout bounds each attempt of a call to d (within the
// caller's deadline), so that a server that hangs leaves an idempotent
// call time for its retries. 0 (default): an attempt may use the whole
// deadline.
func WithAttemptTimeout(d time.Duration) Option { return func(o *options) { o.attemptTO = d } }

// WithBreaker configures the per-server circuit breakers; zero fields keep
// their defaults.
func WithBreaker(s BreakerSettings) Option {
	return func(o *options) {
		if s.Failures > 0 {
			o.breaker.Failures = s.Failures
		}
		if s.OpenFor > 0 {
			o.breaker.OpenFor = s.OpenFor
		}
		if s.HalfOpenCalls > 0 {
			o.breaker.HalfOpenCalls = s.HalfOpenCalls
		}
	}
}

// WithBreakerObserver calls f on every breaker state change (f must not
// block: it runs with the breaker locked).
func WithBreakerObserver(f func(addr string, from, to BreakerState)) Option {
	return func(o *options) { o.onStateChange = f }
}
