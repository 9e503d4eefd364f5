package server

import (
	"golang.org/x/time/rate"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Limiter decides whether a call may run now; *rate.Limiter
// (golang.org/x/time/rate) is one. It is asked once per call, from many
// goroutines at once.
type Limiter interface {
	Allow() bool
}

// WithRateLimit limits the calls of method ("Service:name" or "name") to
// limit per second, with bursts of up to burst, across all connections
// and transports (a token bucket of golang.org/x/time/rate). A call over
// the limit does not run: the caller gets proto.ErrOverloaded (match it
// with errors.Is; it may be sent again later), and the call is counted
// with outcome "overload" in hatrpc_server_errors_total.
func WithRateLimit(method string, limit rate.Limit, burst int) Option {
	return WithLimiter(method, rate.NewLimiter(limit, burst))
}

// WithLimiter is WithRateLimit with a limiter of the caller's own (a
// shared one, another algorithm, a controlled one in tests).
func WithLimiter(method string, l Limiter) Option {
	return func(o *options) {
		if o.limiters == nil {
			o.limiters = map[string]Limiter{}
		}
		o.limiters[method] = l
	}
}

// methodLimiter returns the limiter of svc:name, nil for none.
func (s *Server) methodLimiter(svc, name string) Limiter {
	if l, ok := s.opts.limiters[svc+":"+name]; ok {
		return l
	}
	return s.opts.limiters[name]
}

// serverOutcome labels how a call ended (proto.Outcome), with what the
// client is sent for the cases proto leaves open: a missing result, and
// any other handler error or panic, which reach it as INTERNAL_ERROR.
func serverOutcome(res proto.Struct, err error, oneway bool) string {
	if err == nil && res == nil && !oneway {
		return "missing_result"
	}
	if o := proto.Outcome(res, err); o != "" {
		return o
	}
	return "internal_error"
}
