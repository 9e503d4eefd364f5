package retrypolicy

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBudget(t *testing.T) {
	cases := []struct {
		name     string
		ratio    float64
		calls    int
		withdraw int // allowed of as many tries as calls
	}{
		{"none", 0, 10, 0},
		{"a fifth", 0.2, 10, 2},
		{"a tenth", 0.1, 25, 2},
		{"one each", 1, 7, 7},
		{"negative is none", -1, 5, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(tc.ratio, 0)
			got := 0
			for range tc.calls {
				b.Deposit()
				if b.Withdraw() {
					got++
				}
			}
			assert.Equal(t, tc.withdraw, got)
		})
	}
}

func TestBudgetCapped(t *testing.T) {
	b := NewBudget(1, 0)
	for range 5 * budgetWindow {
		b.Deposit()
	}
	got := 0
	for b.Withdraw() {
		got++
	}
	assert.Equal(t, budgetWindow, got, "the balance holds what the last 1000 calls deposited")
}

func TestBudgetReserve(t *testing.T) {
	b := NewBudget(0, 3)
	at := time.Unix(1000, 0)
	b.now = func() time.Time { return at }
	got := 0
	for range 10 {
		if b.Withdraw() {
			got++
		}
	}
	assert.Equal(t, 3, got, "a second's reserve at once")
	at = at.Add(time.Second)
	got = 0
	for range 10 {
		if b.Withdraw() {
			got++
		}
	}
	assert.Equal(t, 3, got, "refilled a second later")
}

func TestPause(t *testing.T) {
	bo := Backoff{Initial: time.Hour, Max: time.Hour, Multiplier: 2}.New()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.ErrorIs(t, Pause(ctx, bo), context.DeadlineExceeded, "a pause past the deadline is not waited")

	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	require.ErrorIs(t, Pause(cctx, bo), context.Canceled)

	require.NoError(t, Pause(context.Background(), Backoff{Initial: time.Microsecond, Max: time.Microsecond}.New()))
}

func TestBackoffShape(t *testing.T) {
	bo := Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond, Multiplier: 2}.New()
	var got []time.Duration
	for range 4 {
		got = append(got, bo.NextBackOff())
	}
	assert.Equal(t, []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}, got)
	one := Backoff{Initial: time.Millisecond, Max: time.Second, Multiplier: 0.5}.New()
	assert.Equal(t, time.Millisecond, one.NextBackOff())
	assert.Equal(t, time.Millisecond, one.NextBackOff(), "a multiplier under 1 is 1")
}

// Concurrent deposits and withdrawals add up exactly.
func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(0.5, 0)
	var wg sync.WaitGroup
	var got atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 500 {
				b.Deposit()
				b.Deposit()
				if b.Withdraw() {
					got.Add(1)
				}
			}
		})
	}
	wg.Wait()
	for b.Withdraw() {
		got.Add(1)
	}
	assert.Equal(t, int64(8*500), got.Load(), "two deposits of half a token, one retry")
}
