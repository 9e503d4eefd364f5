package client

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/hatrpc/hatrpc/pkg/internal/retrypolicy"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
)

// Retries and hedges on one Conn. A call of a function hinted idempotent
// (c_hint: idempotent = on) is sent again, after a pause of exponential
// backoff with jitter (WithRetryBackoff), when it failed on its connection
// (a *ConnError) or with codes.Unavailable, up to its retries hint (or
// Retries), within the caller's deadline and within the Conn's retry
// budget (WithRetryBudget). With a hedge delay (the Hedge call option,
// else the hedge hint, else WithHedge) an
// idempotent call that has no answer after the delay is sent a second
// time; the first answer wins and the other copy is cancelled (on HatRPC
// TCP the server's handler sees its context end). Calls of other
// functions are never sent twice. Retries run under the interceptors:
// they see one call.

// Backoff shapes the pauses between a call's attempts (the same type as
// cluster.Backoff).
type Backoff = retrypolicy.Backoff

// Retry budget defaults: Finagle's.
const (
	DefaultRetryRatio        = 0.2 // retries per call, over time
	DefaultRetryMinPerSecond = 10  // retries a second allowed without calls to pay for them
)

type retryOptions struct {
	backoff   Backoff
	ratio     float64
	minPerSec int
	hedge     time.Duration
	off       bool
	observe   func(RetryEvent)
}

func defaultRetryOptions() retryOptions {
	return retryOptions{backoff: retrypolicy.DefaultBackoff, ratio: DefaultRetryRatio, minPerSec: DefaultRetryMinPerSecond}
}

// WithRetryBackoff shapes the pauses between the attempts of a retried
// call (default 5 ms doubling to 500 ms, ±50 %).
func WithRetryBackoff(b Backoff) Option { return func(o *options) { o.retry.backoff = b } }

// WithRetryBudget bounds the Conn's retries and hedges together to ratio
// of its calls (each call of an idempotent function deposits ratio of a
// token, each retry or hedge takes one), plus minPerSecond a second, so
// that when a server fails every call, retries add at most ratio to the
// load instead of multiplying it (defaults DefaultRetryRatio,
// DefaultRetryMinPerSecond). WithRetryBudget(0, 0) allows none.
func WithRetryBudget(ratio float64, minPerSecond int) Option {
	return func(o *options) { o.retry.ratio, o.retry.minPerSec = ratio, minPerSecond }
}

// WithHedge sends a second copy of an idempotent call that has no answer
// after d (0, the default: no hedging). A function's hedge hint
// (c_hint: hedge = 10ms) overrides it, and the Hedge call option both.
func WithHedge(d time.Duration) Option { return func(o *options) { o.retry.hedge = d } }

// WithoutRetries turns the Conn's retries and hedges off, whatever the
// hints and call options say: for callers that retry themselves
// (pkg/cluster builds its Conns with it).
func WithoutRetries() Option { return func(o *options) { o.retry.off = true } }

// WithRetryObserver calls f for every retry, hedge and throttled retry
// of the Conn's calls (clientmetrics.Metrics.ObserveRetry counts them).
// f runs on the caller's goroutine and must not block.
func WithRetryObserver(f func(RetryEvent)) Option { return func(o *options) { o.retry.observe = f } }

// RetryKind says what a RetryEvent is.
type RetryKind uint8

const (
	// Retried: the call is sent again after a failed attempt.
	Retried RetryKind = iota
	// Hedged: a second copy of a call without an answer yet is sent.
	Hedged
	// Throttled: a retry or hedge the retry budget did not allow.
	Throttled
)

func (k RetryKind) String() string {
	switch k {
	case Retried:
		return "retry"
	case Hedged:
		return "hedge"
	}
	return "throttled"
}

// RetryEvent is a retry, a hedge or a throttled retry of a call of Method.
type RetryEvent struct {
	Method *Method
	Kind   RetryKind
	Err    error // the failed attempt's error (nil for a hedge)
}

// CallOption changes one call (WithCallOptions). Generated clients take
// none: the options ride the call's context.
type CallOption func(*callOpts)

type callOpts struct {
	timeout    time.Duration
	retries    int
	retriesSet bool
	hedge      time.Duration
	hedgeSet   bool
}

// CallTimeout bounds the call, its retries included, to d from its start
// (the context's deadline still applies when it is earlier).
func CallTimeout(d time.Duration) CallOption { return func(o *callOpts) { o.timeout = d } }

// Retries sets the call's retries (attempts after the first) when its
// function is idempotent, in place of the retries hint; 0: none. The
// retry budget still applies.
func Retries(n int) CallOption {
	return func(o *callOpts) { o.retries, o.retriesSet = max(n, 0), true }
}

// NoRetry sends the call once: no retry, no hedge.
func NoRetry() CallOption {
	return func(o *callOpts) { o.retries, o.retriesSet, o.hedge, o.hedgeSet = 0, true, 0, true }
}

// Hedge sets the call's hedge delay (0: no hedge), in place of the Conn's
// WithHedge; only idempotent functions are hedged.
func Hedge(d time.Duration) CallOption {
	return func(o *callOpts) { o.hedge, o.hedgeSet = max(d, 0), true }
}

type callOptsKey struct{}

// callOptsUsed turns on the look-up of call options: a process that never
// sets any does not walk every call's context for them.
var callOptsUsed atomic.Bool

// WithCallOptions returns ctx whose calls (on any Conn) take opts, after
// the call options ctx already holds.
func WithCallOptions(ctx context.Context, opts ...CallOption) context.Context {
	var co callOpts
	if old, ok := ctx.Value(callOptsKey{}).(*callOpts); ok {
		co = *old
	}
	for _, f := range opts {
		f(&co)
	}
	callOptsUsed.Store(true)
	return context.WithValue(ctx, callOptsKey{}, &co)
}

// retryState is a Conn's retry budget, made on its first retried call.
type retryState struct {
	once   sync.Once
	budget *retrypolicy.Budget
}

func (c *Conn) retryBudget() *retrypolicy.Budget {
	c.retry.once.Do(func() { c.retry.budget = retrypolicy.NewBudget(c.o.retry.ratio, c.o.retry.minPerSec) })
	return c.retry.budget
}

// call runs one call with its call options, retries and hedges (see the
// top of this file); use is CallBorrowed's borrower (nil for Call).
func (c *Conn) call(ctx context.Context, m *Method, args, result proto.Struct, use func() error) error {
	var co *callOpts
	if callOptsUsed.Load() {
		co, _ = ctx.Value(callOptsKey{}).(*callOpts)
	}
	if co != nil && co.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, co.timeout)
		defer cancel()
	}
	plan := c.planRetries(m, co)
	if plan.retries == 0 && plan.hedge == 0 {
		return c.invokeUse(ctx, m, args, result, use)
	}
	return c.retrying(ctx, m, args, result, use, &plan)
}

// retryPlan is how often a call may be sent again (retries) and after
// how long it is hedged (0: never).
type retryPlan struct {
	retries int
	hedge   time.Duration
}

// planRetries returns the retry plan of a call of m: none for a function
// not hinted idempotent.
func (c *Conn) planRetries(m *Method, co *callOpts) retryPlan {
	if c.o.retry.off || m.Oneway || m.Hints == nil || !m.Hints.Client.Idempotent {
		return retryPlan{}
	}
	retries, hedge := m.Hints.Client.RetryBudget(), c.o.retry.hedge
	if h := m.Hints.Client.Hedge; h > 0 {
		hedge = h // the function's hint, over the Conn's default
	}
	if co != nil {
		if co.retriesSet {
			retries = co.retries
		}
		if co.hedgeSet {
			hedge = co.hedge
		}
	}
	return retryPlan{retries: retries, hedge: hedge}
}

func (c *Conn) observe(m *Method, k RetryKind, err error) {
	if f := c.o.retry.observe; f != nil {
		f(RetryEvent{Method: m, Kind: k, Err: err})
	}
}

// retrying is call for an idempotent function: attempts (hedged when
// plan.hedge > 0) until one succeeds, fails for good, or the retries, the
// budget or the deadline run out; it returns the last attempt's error.
func (c *Conn) retrying(ctx context.Context, m *Method, args, result proto.Struct, use func() error, plan *retryPlan) error {
	budget := c.retryBudget()
	budget.Deposit()
	var bo *backoff.ExponentialBackOff
	for n := 0; ; n++ {
		var (
			final bool
			err   error
		)
		if plan.hedge > 0 {
			final, err = c.hedged(ctx, m, args, result, use, plan.hedge)
		} else {
			final, err = c.attempt(ctx, m, args, result, use)
		}
		if err == nil || final || n >= plan.retries || !c.retryable(ctx, err) {
			return err
		}
		if !budget.Withdraw() {
			c.observe(m, Throttled, err)
			return err
		}
		if bo == nil {
			bo = c.o.retry.backoff.New()
		}
		if retrypolicy.Pause(ctx, bo) != nil {
			return err // the deadline leaves no time for another attempt
		}
		c.observe(m, Retried, err)
	}
}

// attempt sends the call once. final is true when the error is the
// borrower's own (use ran): the reply arrived.
func (c *Conn) attempt(ctx context.Context, m *Method, args, result proto.Struct, use func() error) (bool, error) {
	if use == nil {
		return false, c.invokeUse(ctx, m, args, result, nil)
	}
	ran := false
	err := c.invokeUse(ctx, m, args, result, func() error { ran = true; return use() })
	return ran, err
}

// retryable reports whether a failed attempt may succeed if sent again:
// it failed on its connection or with Unavailable, the Conn is open and
// the caller still waits.
func (c *Conn) retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	return !closed && status.Code(err) == codes.Unavailable
}

// hedged sends the call and, if no answer came after delay and the
// Conn's retry budget allows, a second copy; the first answer that is not a retryable
// failure wins, the other copy is cancelled, and hedged returns once both
// have ended (a caller that reuses args and result may: nothing runs on
// them any more). Each copy decodes into a result of its own; the
// winner's is copied into result, and the borrower runs on it then.
func (c *Conn) hedged(ctx context.Context, m *Method, args, result proto.Struct, use func() error, delay time.Duration) (bool, error) {
	budget := c.retryBudget()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		res proto.Struct
		err error
	}
	answers := make(chan answer, 2)
	send := func() {
		res := freshResult(result)
		go func() { answers <- answer{res, c.invokeUse(hctx, m, args, res, nil)} }()
	}
	send()
	pending, hedgeSent := 1, false
	t := time.NewTimer(delay)
	defer t.Stop()
	var won *answer
	var last error
	for pending > 0 {
		select {
		case <-t.C:
			if won != nil {
				continue // answered: the loser is draining
			}
			if budget.Withdraw() {
				c.observe(m, Hedged, nil)
				send()
				pending++
			} else {
				c.observe(m, Throttled, nil)
			}
			hedgeSent = true
		case a := <-answers:
			pending--
			last = a.err
			if won == nil && (a.err == nil || !c.retryable(ctx, a.err)) {
				won = &a
				cancel() // the other copy, if any
			} else if pending == 0 && !hedgeSent && won == nil {
				// The only copy failed before the hedge was due: the
				// retry loop decides what comes next.
				return false, a.err
			}
		}
	}
	if won == nil {
		return false, last
	}
	if won.err != nil {
		return false, won.err
	}
	copyResult(result, won.res)
	if use != nil {
		return true, use()
	}
	return false, nil
}

// freshResult returns a new zero value of result's type (a pointer to a
// generated struct), nil for nil.
func freshResult(result proto.Struct) proto.Struct {
	if result == nil {
		return nil
	}
	return reflect.New(reflect.TypeOf(result).Elem()).Interface().(proto.Struct)
}

func copyResult(dst, src proto.Struct) {
	if dst == nil {
		return
	}
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}
