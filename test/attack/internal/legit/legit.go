// Package legit is the legitimate client of the attack probes: while an
// attack runs, it Gets the user* records one after another and records
// each call's latency and error, for the probe to report.
package legit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// GetFunc fetches one record.
type GetFunc func(ctx context.Context, key string) error

// callTimeout bounds each Get, so a server that stops answering shows as
// errors rather than a probe that hangs.
const callTimeout = 10 * time.Second

// Client is a running legitimate client.
type Client struct {
	stop, done chan struct{}

	mu   sync.Mutex
	lat  []time.Duration
	errs int
}

// Start starts Getting user000000 ... user009999 in turn with get, until
// Stop; the first two errors are printed as they come.
func Start(ctx context.Context, get GetFunc) *Client {
	c := &Client{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for i := 0; ; i++ {
			select {
			case <-c.stop:
				return
			default:
			}
			t0 := time.Now()
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			err := get(cctx, fmt.Sprintf("user%06d", i%10000))
			cancel()
			c.mu.Lock()
			c.lat = append(c.lat, time.Since(t0))
			if err != nil {
				if c.errs++; c.errs < 3 {
					fmt.Println("legitimate client's error:", err)
				}
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// Stats is what the client saw: its calls, their errors, the 99th
// percentile and the largest latency.
type Stats struct {
	Calls, Errors int
	P99, Max      time.Duration
}

// Stop stops the client, waits for its last call and returns its figures.
func (c *Client) Stop() Stats {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	slices.Sort(c.lat)
	s := Stats{Calls: len(c.lat), Errors: c.errs}
	if n := len(c.lat); n > 0 {
		s.P99, s.Max = c.lat[n*99/100], c.lat[n-1]
	}
	return s
}

// Print prints s as the probes report it (test/attack/table.sh reads
// these lines).
func (s Stats) Print() {
	fmt.Printf("legitimate Gets %d, errors %d, p99 %v\n", s.Calls, s.Errors, s.P99)
	if s.Calls > 0 {
		fmt.Printf("legitimate max %v\n", s.Max)
	}
}
