package rdma

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkProtocolRoundTrip measures one call's round trip per protocol on
// the provider in use (shm here): two endpoints in this process, the server
// on its own OS thread, same protocol both ways, the same size each way.
//
//	go test ./pkg/rdma -run '^$' -bench ProtocolRoundTrip -benchtime 20000x
func BenchmarkProtocolRoundTrip(b *testing.B) {
	for _, poll := range []Polling{PollBusy, PollEvent} {
		for _, proto := range Protocols() {
			for _, n := range []int{64, 4 << 10} {
				b.Run(fmt.Sprintf("%v/%v/%dB", poll, proto, n), func(b *testing.B) {
					benchRoundTrip(b, proto, poll, n)
				})
			}
		}
	}
}

func benchRoundTrip(b *testing.B, proto Protocol, poll Polling, n int) {
	cfg := testEPConfig(poll)
	cfg.EagerThreshold = 4 << 10
	cli, srv := newRPCPair(b, cfg, cfg, false)
	resp := make([]byte, n)
	serve(b, srv, proto, func([]byte) []byte { return resp })
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	req := make([]byte, n)
	ctx := context.Background()
	for i := 0; i < 100; i++ { // warm up: pools, page faults, caches
		_, err := cli.Call(ctx, proto, req)
		require.NoError(b, err)
	}
	b.SetBytes(int64(2 * n))
	// The host is shared: a busy poller that loses its CPU inflates the
	// mean, so the median and p99 of the individual calls are reported too.
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := cli.Call(ctx, proto, req); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	if proto == ProtoRFP {
		st := cli.Stats()
		b.ReportMetric(float64(st.RFPRetries)/float64(st.Calls), "retries/call")
	}
}
