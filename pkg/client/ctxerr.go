package client

import (
	"context"
	"errors"
	"time"
)

// ErrNotSent is matched (errors.Is) by the error of a call whose context
// ended before its request left the client: the call ran nowhere. The
// error also matches the context's own (context.DeadlineExceeded or
// context.Canceled) and reads as it does. A retrying layer (pkg/cluster)
// does not count such a call as an attempt.
var ErrNotSent = errors.New("client: request not sent")

// notSentError is a context's error for a call that was not sent.
type notSentError struct{ err error }

func (e *notSentError) Error() string        { return e.err.Error() }
func (e *notSentError) Unwrap() error        { return e.err }
func (e *notSentError) Is(target error) bool { return target == ErrNotSent }

// Made once: a call that finds its deadline passed allocates nothing.
var (
	errDeadlineNotSent = &notSentError{context.DeadlineExceeded}
	errCanceledNotSent = &notSentError{context.Canceled}
)

// notSent is ctx's error (nil or a context error) marked as a call's that
// was not sent.
func notSent(err error) error {
	switch err {
	case context.DeadlineExceeded:
		return errDeadlineNotSent
	case context.Canceled:
		return errCanceledNotSent
	case nil:
		return nil
	}
	return &notSentError{err} // a context's cause of its own
}

// callFailed is the error of a call whose exchange failed: the caller's
// own context error if that is why, else the connection error.
func callFailed(ctx context.Context, op string, err error) error {
	if cerr := ctxFailure(ctx); cerr != nil {
		return cerr
	}
	return &ConnError{Op: op, Err: err}
}

// ctxFailure is ctx's error, or DeadlineExceeded once its deadline passed
// (ctx.Err() can lag behind the clock when the timer goroutine runs late).
func ctxFailure(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// ownDeadline reports the caller's own deadline rather than the server's
// echo of it: the server gave up on the deadline we sent it just as we did,
// and ctx.Err() can lag behind the clock when the timer goroutine runs late.
func ownDeadline(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctxFailure(ctx); cerr != nil {
		return cerr
	}
	return err
}
