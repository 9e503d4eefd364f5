package etcd

import (
	"context"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// retry paces a loop that tries again after failures: pauses from 100 ms
// doubling to a maximum (±20 %), and one log line at Warn for the first
// failure of a streak, the others at Debug, so an etcd outage is one line
// however long it lasts.
type retry struct {
	bo      *backoff.ExponentialBackOff
	log     *slog.Logger
	failing bool
}

func newRetry(log *slog.Logger, maxPause time.Duration) *retry {
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     100 * time.Millisecond,
		RandomizationFactor: 0.2,
		Multiplier:          2,
		MaxInterval:         max(maxPause, 100*time.Millisecond),
	}
	bo.Reset()
	return &retry{bo: bo, log: log}
}

// ok ends a streak of failures, reporting whether there was one.
func (r *retry) ok() bool {
	was := r.failing
	r.failing = false
	r.bo.Reset()
	return was
}

// failed logs a failure (first or again, with args) and waits the next
// pause; false when ctx ended first.
func (r *retry) failed(ctx context.Context, first, again string, args ...any) bool {
	if r.failing {
		r.log.Debug(again, args...)
	} else {
		r.log.Warn(first, args...)
		r.failing = true
	}
	t := time.NewTimer(r.bo.NextBackOff())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
