package server

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
)

// A burst of work leaves idle workers behind; the sweeper retires the
// ones nobody reused while steady traffic keeps reusing the same few.
func TestPoolRetiresIdleWorkers(t *testing.T) {
	var p pool
	p.init()
	p.idleFor, p.sweepEvery = 100*time.Millisecond, 20*time.Millisecond
	defer p.stop()

	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	block := make(chan struct{})
	const burst = 200
	for range burst {
		wg.Add(1)
		p.run(&conn{serveHook: func() { defer wg.Done(); <-block }})
	}
	require.GreaterOrEqual(t, runtime.NumGoroutine(), before+burst)
	close(block)
	wg.Wait()

	// Steady trickle: one task at a time must not keep the burst alive.
	// The deadline only guards against a hang, so it scales with the host.
	deadline := time.Now().Add(testenv.HangGuard(5 * time.Second))
	for time.Now().Before(deadline) {
		done := make(chan struct{})
		p.run(&conn{serveHook: func() { close(done) }})
		<-done
		p.mu.Lock()
		n := len(p.idle)
		p.mu.Unlock()
		if n <= 2 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("idle workers were not retired")
}

// After a burst of connections, workers beyond poolKeep retire after one
// sweep period (not poolIdle), and the server is told to give memory back.
func TestPoolRetiresBurstBeyondKeep(t *testing.T) {
	var p pool
	p.init()
	p.idleFor, p.sweepEvery = time.Hour, 20*time.Millisecond
	gave := make(chan struct{}, 1)
	p.onRetire = func() {
		select {
		case gave <- struct{}{}:
		default:
		}
	}
	defer p.stop()
	var wg sync.WaitGroup
	block := make(chan struct{})
	const burst = poolKeep + 300
	for range burst {
		wg.Add(1)
		p.run(&conn{serveHook: func() { defer wg.Done(); <-block }})
	}
	close(block)
	wg.Wait()
	select {
	case <-gave:
	case <-time.After(testenv.HangGuard(10 * time.Second)):
		t.Fatal("the burst's workers were not retired")
	}
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.idle) == poolKeep
	}, testenv.HangGuard(10*time.Second), time.Millisecond, "poolKeep workers stay for poolIdle")
}
