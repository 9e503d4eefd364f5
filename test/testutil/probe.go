package testutil

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
)

// Prober is a well-behaved Apache client that keeps pinging a server while
// a fault test abuses it: "other clients are unaffected" means the prober
// sees no error and keeps making progress.
type Prober struct {
	ok     atomic.Int64
	mu     sync.Mutex
	errs   []error
	cancel context.CancelFunc
	done   chan struct{}
}

// StartProber pings addr over a framed+binary Apache connection every
// interval until Stop.
func StartProber(t testing.TB, addr string, interval time.Duration) *Prober {
	t.Helper()
	c, closer, err := DialApacheErr(addr, Stack{Framed, Binary})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prober{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer closer()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			callCtx, cancelCall := context.WithTimeout(ctx, testenv.HangGuard(5*time.Second)) // a hang guard: the probe asserts health, not speed
			err := c.Ping(callCtx)
			cancelCall()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				p.mu.Lock()
				p.errs = append(p.errs, err)
				p.mu.Unlock()
			} else {
				p.ok.Add(1)
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *Prober) stop() {
	p.cancel()
	<-p.done
}

// Check stops the prober and asserts it never failed and made progress.
func (p *Prober) Check(t testing.TB) {
	t.Helper()
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Empty(t, p.errs, "a bystander client saw errors: %v", fmt.Sprint(p.errs))
	require.Positive(t, p.ok.Load(), "the bystander client made no progress")
}

// Successes is the number of pings that succeeded so far.
func (p *Prober) Successes() int64 { return p.ok.Load() }
