package cluster

import (
	"context"
	"errors"
	"fmt"
)

// Why a call failed, matched with errors.Is on a *CallError.
var (
	// ErrNoServer: no server could take the call (every one down, or its
	// breaker open), so it was not sent anywhere.
	ErrNoServer = errors.New("cluster: no server available")
	// ErrNotRetried: the call failed after it may have reached a server,
	// and its function is not idempotent (or has retries = 0), so it was
	// not sent again: the caller decides whether running it twice is safe.
	ErrNotRetried = errors.New("cluster: not sent again")
	// ErrRetriesExhausted: an idempotent call failed on every attempt its
	// retries hint allows.
	ErrRetriesExhausted = errors.New("cluster: retries exhausted")
)

// CallError is a call that failed for the servers' sake (a broken
// connection, a timeout, no server available), with what was tried. It
// matches its kind (ErrNoServer, ErrNotRetried, ErrRetriesExhausted,
// context.DeadlineExceeded or context.Canceled) and the last attempt's
// own error (such as client.ErrConnClosed). Exceptions and application
// errors are returned as they are, never as a CallError.
type CallError struct {
	Method     string // Service.function
	Addr       string // the server of the last attempt; "" when none was sent
	Attempts   int    // attempts that may have reached a server
	Idempotent bool   // the function's idempotent hint
	Err        error  // the last attempt's error
	kind       error
}

func (e *CallError) Error() string {
	cause := ""
	if e.Err != nil && e.Err != e.kind {
		cause = ": " + e.Err.Error()
	}
	if e.Attempts == 0 && (e.kind == context.DeadlineExceeded || e.kind == context.Canceled) {
		why := "its deadline had passed"
		if e.kind == context.Canceled {
			why = "its context was canceled"
		}
		return fmt.Sprintf("cluster: %s was not sent: %s: %v", e.Method, why, e.Err)
	}
	switch e.kind {
	case ErrNotRetried:
		why := "not idempotent"
		if e.Idempotent {
			why = "retries = 0"
		}
		return fmt.Sprintf("cluster: %s failed on %s and was not sent again (%s)%s", e.Method, e.Addr, why, cause)
	case ErrRetriesExhausted:
		return fmt.Sprintf("cluster: %s failed %d times, last on %s%s", e.Method, e.Attempts, e.Addr, cause)
	case ErrNoServer:
		return fmt.Sprintf("cluster: %s: no server available (each is down or its breaker open)%s", e.Method, cause)
	case context.DeadlineExceeded:
		return fmt.Sprintf("cluster: %s failed on %s, and its deadline leaves no time for another attempt (%d made): %v", e.Method, e.Addr, e.Attempts, e.Err)
	}
	return fmt.Sprintf("cluster: %s: %v after %d attempts%s", e.Method, e.kind, e.Attempts, cause)
}

// Unwrap returns the kind and the last attempt's error.
func (e *CallError) Unwrap() []error { return []error{e.kind, e.Err} }
