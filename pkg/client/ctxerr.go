package client

import (
	"context"
	"time"
)

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
