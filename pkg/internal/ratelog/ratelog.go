// Package ratelog bounds the log lines that peers can trigger: a refused
// connection, a wrong token or an ignored admin call is worth a line, but
// a peer that repeats it thousands of times a second must not turn into
// thousands of lines (disk, CPU, and the operator's attention).
//
// Each distinct message logs at most one line per interval; the events
// that interval swallowed are counted and reported, as "suppressed", on
// the next line of that message.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultEvery is the interval of a Limiter whose Every is zero.
const DefaultEvery = time.Second

// maxKeys bounds the messages a Limiter remembers: messages are constants
// of the code, so this is never reached by honest use; past it the
// oldest state is forgotten rather than growing.
const maxKeys = 256

// Limiter logs through Logger at most one line per message per Every.
// The zero value is not usable: Logger must be set. It is safe for
// concurrent use.
type Limiter struct {
	Logger *slog.Logger
	Every  time.Duration
	// now is the clock; tests set it so no test depends on real time.
	now func() time.Time

	mu    sync.Mutex
	state map[string]*entry
}

type entry struct {
	last       time.Time
	suppressed int
}

// New returns a Limiter logging through l at most once per every for
// each message.
func New(l *slog.Logger, every time.Duration) *Limiter {
	return &Limiter{Logger: l, Every: every}
}

// Warn logs msg at Warn level, unless msg was logged less than Every ago.
func (r *Limiter) Warn(msg string, args ...any) {
	r.Log(context.Background(), slog.LevelWarn, msg, args...)
}

// Info logs msg at Info level, unless msg was logged less than Every ago.
func (r *Limiter) Info(msg string, args ...any) {
	r.Log(context.Background(), slog.LevelInfo, msg, args...)
}

// Log logs msg at level, unless msg was logged less than Every ago; then
// it only counts it. The args of a suppressed event are not formatted.
func (r *Limiter) Log(ctx context.Context, level slog.Level, msg string, args ...any) {
	if !r.Logger.Enabled(ctx, level) {
		return
	}
	n, ok := r.admit(msg)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	r.Logger.Log(ctx, level, msg, args...)
}

// admit tells whether msg may be logged now, and how many events of it
// were suppressed since its last line.
func (r *Limiter) admit(msg string) (int, bool) {
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	every := r.Every
	if every <= 0 {
		every = DefaultEvery
	}
	t := now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		r.state = make(map[string]*entry)
	}
	e := r.state[msg]
	if e == nil {
		if len(r.state) >= maxKeys {
			clear(r.state)
		}
		r.state[msg] = &entry{last: t}
		return 0, true
	}
	if t.Sub(e.last) < every {
		e.suppressed++
		return 0, false
	}
	n := e.suppressed
	e.last, e.suppressed = t, 0
	return n, true
}
