package hs2

import (
	"fmt"
	"time"
)

// Idle sessions, as Hive's hive.server2.idle.session.timeout: a session
// no call has named (itself or one of its operations) for the timeout,
// with no operation still running, is closed with its operations, which
// releases their cursors and, through them, the engine's connections. A
// client that vanished without CloseSession holds nothing for longer.

// WithIdleSessionTimeout closes sessions idle for d (0, the default:
// never). The handler checks every d/4 (at least every second, at most
// every minute); calls naming an expired session or its operations get
// INVALID_HANDLE_STATUS saying it expired.
func WithIdleSessionTimeout(d time.Duration) Option { return func(o *options) { o.idle = d } }

// withClock sets the handler's clock (tests).
func withClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// maxExpired bounds the memory of expired handles kept to tell a client
// why its handle is refused; past it the oldest are forgotten (their
// calls then get "unknown or closed").
const maxExpired = 4096

// expiredError is the refusal of a handle whose session expired.
func (h *Handler) expiredError(what string) error {
	return fmt.Errorf("%w: %s expired (idle for more than %v)", ErrInvalidHandle, what, h.opts.idle)
}

// watchIdle checks for idle sessions until Close.
func (h *Handler) watchIdle() {
	every := min(max(h.opts.idle/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	go func() {
		defer close(h.idleDone)
		defer t.Stop()
		for {
			select {
			case <-h.idleStop:
				return
			case <-t.C:
				h.expireIdle()
			}
		}
	}()
}

// expireIdle closes the sessions idle for the timeout at h's clock and
// reports how many it closed.
func (h *Handler) expireIdle() int {
	if h.opts.idle <= 0 {
		return 0
	}
	now := h.opts.now()
	var ops []*operation
	n := 0
	h.mu.Lock()
	for k, s := range h.sessions {
		if now.Sub(s.lastUsed) < h.opts.idle || s.running() {
			continue
		}
		n++
		delete(h.sessions, k)
		h.remember(k, "session")
		for ok, op := range s.ops {
			delete(h.ops, ok)
			h.remember(ok, "the operation's session")
			ops = append(ops, op)
		}
		s.ops = nil
	}
	h.mu.Unlock()
	for _, op := range ops {
		if err := op.close(false); err != nil {
			h.opts.logger.Warn("hs2: closing an idle session's operation", "err", err)
		}
	}
	return n
}

// remember records an expired handle (h.mu held).
func (h *Handler) remember(k handleKey, what string) {
	if len(h.expired) >= maxExpired {
		oldest := h.expiredOrder[0]
		h.expiredOrder = h.expiredOrder[1:]
		delete(h.expired, oldest)
	}
	h.expired[k] = what
	h.expiredOrder = append(h.expiredOrder, k)
}

// running says whether an operation of s still runs (h.mu held): a
// session waiting on its query is not idle.
func (s *session) running() bool {
	for _, op := range s.ops {
		if !op.finished() {
			return true
		}
	}
	return false
}
