package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
)

// countingDB counts finished operations for the progress line and runs
// every call under ctx rather than the phase's context (see runPhase).
type countingDB struct {
	db   ycsb.DB
	ctx  context.Context
	done atomic.Int64

	mu  sync.Mutex
	err error // the first failure, for the summary
}

func (c *countingDB) note(err error) error {
	c.done.Add(1)
	if err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
	}
	return err
}

func (c *countingDB) firstError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *countingDB) Read(_ context.Context, key string, fields []string) (map[string][]byte, error) {
	r, err := c.db.Read(c.ctx, key, fields)
	return r, c.note(err)
}

func (c *countingDB) Update(_ context.Context, key string, values map[string][]byte) error {
	return c.note(c.db.Update(c.ctx, key, values))
}

func (c *countingDB) Insert(_ context.Context, key string, values map[string][]byte) error {
	return c.note(c.db.Insert(c.ctx, key, values))
}

func (c *countingDB) Scan(_ context.Context, start string, n int, fields []string) ([]map[string][]byte, error) {
	r, err := c.db.Scan(c.ctx, start, n, fields)
	return r, c.note(err)
}

func (c *countingDB) MultiRead(_ context.Context, keys []string, fields []string) ([]map[string][]byte, error) {
	r, err := c.db.MultiRead(c.ctx, keys, fields)
	return r, c.note(err)
}

func (c *countingDB) MultiUpdate(_ context.Context, keys []string, values []map[string][]byte) error {
	return c.note(c.db.MultiUpdate(c.ctx, keys, values))
}

// progress redraws one status line with \r while a phase runs.
type progress struct {
	quit chan struct{}
	done chan struct{}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func startProgress(w io.Writer, mode, phase string, total int64, dur time.Duration, count *atomic.Int64) *progress {
	p := &progress{quit: make(chan struct{}), done: make(chan struct{})}
	on := mode == "on" || (mode == "auto" && isTerminal(w))
	if !on {
		close(p.done)
		return p
	}
	start := time.Now()
	go func() {
		defer close(p.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		width := 0
		draw := func() {
			el := time.Since(start)
			n := count.Load()
			line := fmt.Sprintf("[%s] %6.1fs %d ops, %.0f ops/s", phase, el.Seconds(), n, float64(n)/max(el.Seconds(), 1e-9))
			switch {
			case dur > 0 && phase == "run":
				line += fmt.Sprintf(" (%.0f%% of %v)", 100*min(el.Seconds()/dur.Seconds(), 1), dur)
			case total > 0 && total < 1<<62:
				line += fmt.Sprintf(" (%.1f%% of %d)", 100*float64(n)/float64(total), total)
			}
			width = max(width, len(line))
			fmt.Fprintf(w, "\r%-*s", width, line)
		}
		draw() // at once, so even a short phase shows it started
		for {
			select {
			case <-p.quit:
				fmt.Fprintf(w, "\r%s\r", strings.Repeat(" ", width))
				return
			case <-t.C:
				draw()
			}
		}
	}()
	return p
}

func (p *progress) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.quit)
	<-p.done
}
