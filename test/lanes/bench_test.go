package lanes_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix/mixserver"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// BenchmarkMix is the HatRPC mix benchmark: half the callers call ping (a
// latency-hinted function, 64 B), half call crunch (throughput-hinted, 128
// KiB, its handler checksums the payload), all at once. Reported: ping's
// p50/p99 latency and crunch's MB/s; over TCP, over shm lanes planned with
// the function-level hints, and with the service-level hints only.
// HATRPC_PROVIDER picks the verbs provider (shm here, ibv on RDMA nodes).
func BenchmarkMix(b *testing.B) {
	configs := []struct {
		name     string
		lanes    string
		svcLevel bool
	}{
		{"tcp", "off", false},
		{"lanes/hints=function", "auto", false},
		{"lanes/hints=service", "auto", true},
	}
	for _, cfg := range configs {
		for _, callers := range []int{2, 8, 32} {
			b.Run(cfg.name+"/callers="+itoa(callers), func(b *testing.B) {
				benchMix(b, cfg.lanes, cfg.svcLevel, callers)
			})
		}
	}
}

func itoa(n int) string { return string(rune('0'+n/10%10)) + string(rune('0'+n%10)) }

func benchMix(b *testing.B, lanes string, svcLevel bool, callers int) {
	sopts := []server.Option{server.WithRDMA("auto"), server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	copts := []client.Option{client.WithRDMA(lanes), client.WithHints(&mix.MixHints)}
	if svcLevel {
		sopts = append(sopts, server.WithServiceLevelHints())
		copts = append(copts, client.WithServiceLevelHints())
	}
	srv := server.New(sopts...)
	mixserver.RegisterMix(srv, &handler{infos: map[string]string{}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		srv.Close()
		<-done
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Minute))
	defer cancel()
	conn, err := client.Dial(ctx, ln.Addr().String(), copts...)
	require.NoError(b, err)
	defer conn.Close()
	c := mix.NewMixClient(conn)
	small := bytes.Repeat([]byte{1}, 64)
	big := bytes.Repeat([]byte{2}, 128<<10)
	var next atomic.Int64
	var crunched atomic.Int64
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	b.ResetTimer()
	start := time.Now()
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				var err error
				if g%2 == 0 {
					t0 := time.Now()
					_, err = c.Ping(ctx, small)
					lat[g] = append(lat[g], time.Since(t0))
				} else {
					_, err = c.Crunch(ctx, big)
					crunched.Add(1)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if n := len(all); n > 0 {
		b.ReportMetric(float64(all[n/2].Nanoseconds())/1e3, "ping-p50-us")
		b.ReportMetric(float64(all[n*99/100].Nanoseconds())/1e3, "ping-p99-us")
	}
	b.ReportMetric(float64(crunched.Load())*float64(len(big))/elapsed.Seconds()/1e6, "crunch-MB/s")
}
