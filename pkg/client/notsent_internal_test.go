package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNotSentAtEveryRoute: each route checks the call's deadline before
// it encodes or sends anything, and a passed one comes back marked as not
// sent (ErrNotSent) while it still matches and reads as the context's own
// error. Each route is called on a zero value: reaching past the check
// would touch its missing connection and panic.
func TestNotSentAtEveryRoute(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	routes := []struct {
		name string
		call func() error
	}{
		{"tcp session", func() error { return (&session{}).call(ctx, "f", false, nil, nil, nil) }},
		{"tcp session, a fast path's frame", func() error { return (&session{}).callFrame(ctx, nil, false, nil, nil) }},
		{"lanes", func() error { return (&lanePool{}).call(ctx, request{}, nil) }},
		{"flock", func() error { return flockRoute{&lanePool{}}.call(ctx, request{}, nil) }},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			err := r.call()
			assert.ErrorIs(t, err, ErrNotSent)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.EqualError(t, err, "context deadline exceeded")
		})
	}
}

func TestNotSentMarksContextErrors(t *testing.T) {
	cause := errors.New("shutting down")
	for _, tc := range []struct {
		name string
		in   error
		is   error
		text string
	}{
		{"deadline", context.DeadlineExceeded, context.DeadlineExceeded, "context deadline exceeded"},
		{"canceled", context.Canceled, context.Canceled, "context canceled"},
		{"a cause of its own", cause, cause, "shutting down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := notSent(tc.in)
			assert.ErrorIs(t, err, ErrNotSent)
			assert.ErrorIs(t, err, tc.is)
			assert.EqualError(t, err, tc.text)
		})
	}
	assert.NoError(t, notSent(nil))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = notSent(context.DeadlineExceeded) }), "the common cases are made once")
}
