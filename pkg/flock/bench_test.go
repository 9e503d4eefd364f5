package flock

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkRPC64: 64-byte RPCs from G goroutines over (a) one QP per
// goroutine, (b) one mutex-shared QP without coalescing, (c) FLOCK with 4
// QPs. Reports requests/s, messages per request and QPs used; ns/op is
// wall time per request over all goroutines.
func BenchmarkRPC64(b *testing.B) {
	modes := []struct {
		name string
		qps  func(g int) int
		opts []Option
	}{
		{"a-qp-per-goroutine", func(g int) int { return g }, nil},
		{"b-mutex-shared-qp", func(int) int { return 1 }, []Option{withMutexSharing()}},
		{"c-flock-4qp", func(int) int { return 4 }, nil},
		// 256 goroutines on 4 QPs keep 64 requests in flight per QP, more
		// than the default 32 credits: this shows what the credit
		// throttle costs.
		{"c-flock-4qp-credits256", func(int) int { return 4 }, []Option{WithCredits(256)}},
		// The runtime's configuration: handlers on a worker pool because
		// they may block (pkg/server).
		{"d-flock-4qp-workers64", func(int) int { return 4 }, []Option{WithWorkers(64)}},
	}
	for _, m := range modes {
		for _, g := range []int{1, 8, 64, 256} {
			b.Run(fmt.Sprintf("%s/g=%d", m.name, g), func(b *testing.B) {
				common := []Option{WithSchedInterval(0), WithRingSize(64 << 10), WithMaxMessage(8 << 10),
					WithMaxActiveQPs(1024)}
				d := openDev(b)
				s := newServer(b, d, append(common, m.opts...)...)
				s.Handle(hEcho, echo)
				c, _ := dial(b, d, s, append(append(common, WithQPs(m.qps(g))), m.opts...)...)
				ctx := tctx(b)
				cls := make([]*Caller, g)
				for i := range cls {
					cls[i] = c.NewCaller()
				}
				per := max(b.N/g, 1)
				before := c.Stats()
				b.ResetTimer()
				cpu0 := processCPU()
				start := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, g)
				for _, cl := range cls {
					wg.Add(1)
					go func() {
						defer wg.Done()
						req := make([]byte, 64)
						for i := 0; i < per; i++ {
							if _, err := cl.Call(ctx, hEcho, req); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				el := time.Since(start)
				cpu := processCPU() - cpu0
				b.StopTimer()
				close(errs)
				for err := range errs {
					require.NoError(b, err)
				}
				st := c.Stats()
				reqs := float64(st.Requests - before.Requests)
				b.ReportMetric(reqs/el.Seconds(), "req/s")
				b.ReportMetric(float64(st.Messages-before.Messages)/reqs, "msgs/req")
				b.ReportMetric(float64(c.QPs()), "QPs")
				// CPU per request (both sides, this process): on a shared
				// 2-core machine far steadier than wall time.
				b.ReportMetric(float64(cpu.Nanoseconds())/reqs, "cpu-ns/req")
			})
		}
	}
}

// BenchmarkFetchAdd64: 8-byte fetch-and-add from 64 goroutines on one
// counter; FLOCK's leader chains the followers' atomics into one post.
func BenchmarkFetchAdd64(b *testing.B) {
	for _, m := range []struct {
		name string
		opts []Option
	}{
		{"b-mutex-shared-qp", []Option{WithQPs(1), withMutexSharing()}},
		{"c-flock-4qp", []Option{WithQPs(4)}},
	} {
		b.Run(m.name, func(b *testing.B) {
			const g = 64
			d := openDev(b)
			s := newServer(b, d, WithSchedInterval(0))
			_, err := s.AttachRegion(64)
			require.NoError(b, err)
			c, _ := dial(b, d, s, append([]Option{WithSchedInterval(0)}, m.opts...)...)
			r := c.Regions()[0]
			ctx := tctx(b)
			per := max(b.N/g, 1)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, g)
			for i := 0; i < g; i++ {
				cl := c.NewCaller()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; k < per; k++ {
						if _, err := cl.FetchAdd(ctx, r, 0, 1); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*g)/time.Since(start).Seconds(), "ops/s")
			b.StopTimer()
			close(errs)
			for err := range errs {
				require.NoError(b, err)
			}
		})
	}
}

// processCPU is the user+system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
