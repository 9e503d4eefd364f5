package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingCaller echoes and counts; it fails from call failAt on and
// sleeps for sleep in call slowAt (0: never).
type countingCaller struct {
	calls, failAt, slowAt int
	sleep                 time.Duration
}

var errCaller = errors.New("caller failed")

func (c *countingCaller) Echo(_ context.Context, p []byte) ([]byte, error) {
	c.calls++
	if c.calls == c.slowAt {
		time.Sleep(c.sleep)
	}
	if c.failAt > 0 && c.calls >= c.failAt {
		return nil, errCaller
	}
	return p, nil
}

func (c *countingCaller) Close() error { return nil }

// TestWarmUpFor: the time-based warm-up makes no call for a zero duration,
// keeps calling until the duration passed otherwise, and stops at the
// first failing or wrong echo.
func TestWarmUpFor(t *testing.T) {
	tests := []struct {
		name    string
		d       time.Duration
		failAt  int
		wantErr error
	}{
		{name: "zero: no calls", d: 0},
		{name: "negative: no calls", d: -time.Second},
		{name: "a few milliseconds", d: 5 * time.Millisecond},
		{name: "failing caller", d: time.Minute, failAt: 3, wantErr: errCaller},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := &countingCaller{failAt: tt.failAt}
			start := time.Now()
			err := warmUpFor(ctx, c, Payload(64), tt.d)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Equal(t, tt.failAt, c.calls)
				return
			}
			require.NoError(t, err)
			if tt.d <= 0 {
				require.Zero(t, c.calls)
				return
			}
			require.Positive(t, c.calls)
			require.GreaterOrEqual(t, time.Since(start), tt.d)
		})
	}
}
