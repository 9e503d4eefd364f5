// Package retrypolicy is what pkg/client (retries and hedges on one
// Conn) and pkg/cluster (retries over many servers) share about sending a
// call again: the shape of the backoff between attempts (cenkalti/backoff
// underneath), the wait that never runs past the caller's deadline, and
// the retry budget that keeps retries from multiplying the load on a
// failing service.
package retrypolicy

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"golang.org/x/time/rate"
)

// Backoff shapes an exponential backoff: the first pause is Initial, each
// next one Multiplier times longer up to Max, every pause randomized by
// ±Jitter of itself (so clients that failed together do not come back in
// step).
type Backoff struct {
	Initial, Max time.Duration
	Multiplier   float64
	Jitter       float64 // 0..1
}

// DefaultBackoff is the retry backoff of a Conn and of a cluster Client
// unless set: 5 ms, doubling to 500 ms, ±50 %.
var DefaultBackoff = Backoff{Initial: 5 * time.Millisecond, Max: 500 * time.Millisecond, Multiplier: 2, Jitter: 0.5}

// New returns a started backoff of shape b.
func (b Backoff) New() *backoff.ExponentialBackOff {
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     b.Initial,
		RandomizationFactor: b.Jitter,
		Multiplier:          b.Multiplier,
		MaxInterval:         b.Max,
	}
	if bo.Multiplier < 1 {
		bo.Multiplier = 1
	}
	bo.Reset()
	return bo
}

// Pause waits out bo's next pause. It returns context.DeadlineExceeded at
// once when ctx's deadline comes before the pause ends (no attempt could
// follow it), and ctx's error when ctx ends during the pause.
func Pause(ctx context.Context, bo *backoff.ExponentialBackOff) error {
	wait := bo.NextBackOff()
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
		return context.DeadlineExceeded
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// milli is one token in the budget's fixed-point units: deposits of a
// fraction of a token add up exactly.
const milli = 1000

// budgetWindow is how many calls' deposits a budget holds at most: a long
// healthy spell does not bank an unbounded burst of retries for the next
// outage.
const budgetWindow = 1000

// Budget is a retry budget (Finagle's RetryBudget, gRPC's retry
// throttling): every call deposits Ratio of a token, every retry or hedge
// withdraws a whole one, so over time retries are at most Ratio × calls,
// plus MinPerSecond retries a second that need no deposit (so a client
// making few calls can still retry). The balance holds at most what
// 1000 calls deposit. Safe for concurrent use.
type Budget struct {
	deposit int64 // milli-tokens per call
	max     int64
	balance atomic.Int64
	reserve *rate.Limiter // nil: no retries without deposits
	now     func() time.Time
}

// NewBudget returns a budget of ratio retries per call plus minPerSecond
// a second. ratio 0 and minPerSecond 0 allow no retry at all.
func NewBudget(ratio float64, minPerSecond int) *Budget {
	b := &Budget{deposit: int64(max(ratio, 0) * milli), now: time.Now}
	b.max = b.deposit * budgetWindow
	if minPerSecond > 0 {
		b.reserve = rate.NewLimiter(rate.Limit(minPerSecond), minPerSecond)
	}
	return b
}

// Deposit records a call (its first attempt). Lock-free, and a full
// budget is only read: every call of a busy Conn deposits, and a shared
// lock or a store to a shared line on each would be felt there.
func (b *Budget) Deposit() {
	for {
		old := b.balance.Load()
		nw := min(old+b.deposit, b.max)
		if nw == old || b.balance.CompareAndSwap(old, nw) {
			return
		}
	}
}

// Withdraw takes one retry from the budget; false when it holds none.
func (b *Budget) Withdraw() bool {
	for {
		old := b.balance.Load()
		if old < milli {
			return b.reserve != nil && b.reserve.AllowN(b.now(), 1)
		}
		if b.balance.CompareAndSwap(old, old-milli) {
			return true
		}
	}
}
