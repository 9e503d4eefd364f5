package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	"github.com/hatrpc/hatrpc/test/attack/internal/legit"
	"github.com/hatrpc/hatrpc/test/attack/internal/procstat"
)

// An attack starts its connections (recorded with track) and the
// goroutines that write on them, and returns; they stop when measure
// closes the connections or stop is closed. note, if not nil, says what
// the attack saw, once it stopped.
type attack func(c config, track func(net.Conn), stop <-chan struct{}) (note func() string, err error)

// conns holds the attack's connections for closing at the end.
type conns struct {
	mu sync.Mutex
	cs []net.Conn
	n  int // ever opened
}

func (cs *conns) track(nc net.Conn) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.cs = append(cs.cs, nc)
	cs.n++
}

func (cs *conns) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, nc := range cs.cs {
		_ = nc.Close()
	}
	cs.cs = nil
}

// measure runs a for c.dur while a legitimate client Gets the user*
// records, then closes the attack's connections and watches c.after;
// it prints what replyflood prints, in the same format.
func measure(ctx context.Context, c config, kv hatkv.KV, a attack) error {
	baseRSS, baseG := procstat.RSS(c.pid), procstat.Goroutines(c.debug)
	var cs conns
	stop := make(chan struct{})
	note, err := a(c, cs.track, stop)
	if err != nil {
		close(stop)
		cs.closeAll()
		return err
	}
	lc := legit.Start(ctx, func(ctx context.Context, key string) error { return get(ctx, c, kv, key) })
	peakRSS, peakG := baseRSS, baseG
	for end := time.Now().Add(c.dur); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		peakRSS, peakG = max(peakRSS, procstat.RSS(c.pid)), max(peakG, procstat.Goroutines(c.debug))
	}
	close(stop)
	cs.closeAll()
	if note != nil {
		fmt.Println("note:", note())
	}
	var afterRSS, afterG int64
	for t0 := time.Now(); time.Since(t0) < c.after; time.Sleep(time.Second) {
		afterRSS, afterG = procstat.RSS(c.pid), procstat.Goroutines(c.debug)
		fmt.Printf("  %4.1fs after close: RSS %d MB, goroutines %d\n", time.Since(t0).Seconds(), afterRSS, afterG)
	}
	st := lc.Stop()
	fmt.Printf("mode=%s calls=%d conns=%d block=%d pairs=%s dur=%v\n", c.mode, c.calls, cs.n, c.block, c.pairs, c.dur)
	fmt.Printf("RSS MB: base %d, peak %d (+%d), %v after close %d\n", baseRSS, peakRSS, peakRSS-baseRSS, c.after, afterRSS)
	fmt.Printf("goroutines: base %d, peak %d, after %d\n", baseG, peakG, afterG)
	st.Print()
	return nil
}

// get is the legitimate client's Get, on its connection or, with
// c.redial, on a new one.
func get(ctx context.Context, c config, kv hatkv.KV, key string) error {
	if c.redial {
		cl, err := hatkv.Dial(ctx, c.addr, c.dialOpts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		kv = cl.KV()
	}
	_, err := kv.Get(ctx, key, nil)
	return err
}
