package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Bounded so a stuck connection cannot hang TSimpleServer.Stop.
	thrift.ServerStopTimeout = 2 * time.Second
	goleak.VerifyTestMain(m)
}

// Sizes and Concurrency are the ATB points of issue 4.
var (
	Sizes       = []int{64, 4 << 10, 128 << 10}
	Concurrency = []int{1, 8, 64}
)

func startSystem(tb testing.TB, name string) (System, string) {
	tb.Helper()
	sys, err := Lookup(name)
	require.NoError(tb, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := sys.Serve(ctx, "127.0.0.1:0")
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(tb, srv.Stop(ctx))
	})
	return sys, srv.Addr()
}

// TestHarness runs the measurement loops briefly against every system and
// checks that they report plausible, internally consistent numbers.
func TestHarness(t *testing.T) {
	for _, name := range inProcessTCPSystems() { // engine systems: TestEngineSmoke
		t.Run(name, func(t *testing.T) {
			sys, addr := startSystem(t, name)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			cs, err := sys.Callers(ctx, addr, 4)
			require.NoError(t, err)
			defer func() { assert.NoError(t, CloseAll(cs)) }()

			tests := []struct {
				size int
			}{{0}, {64}, {128 << 10}}
			for _, tt := range tests {
				lat, err := MeasureLatency(ctx, cs[0], Payload(tt.size), 10, 200)
				require.NoError(t, err, "size %d", tt.size)
				assert.Equal(t, int64(200), lat.Calls)
				assert.Positive(t, lat.P50)
				assert.LessOrEqual(t, lat.P50, lat.P99)
				assert.LessOrEqual(t, lat.P99, lat.P999)
			}

			// Concurrent callers of a shared connection (the pipelined
			// systems) each get their own reply back. (Before the throughput
			// run: the raw systems' callers are not reused once a context ends.)
			eachCall(len(cs), 20, func(i, k int) bool {
				p := bytes.Repeat([]byte{byte(i*20 + k + 1)}, 4<<10+i)
				rep, err := cs[i].Echo(ctx, p)
				return assert.NoError(t, err) && assert.True(t, bytes.Equal(p, rep), "caller %d call %d: wrong reply", i, k)
			})

			tp, err := MeasureThroughput(ctx, cs, Payload(4<<10), 200*time.Millisecond)
			require.NoError(t, err)
			assert.Equal(t, 4, tp.Callers)
			assert.Positive(t, tp.Calls)
			assert.Positive(t, tp.OpsPerSec())
			assert.LessOrEqual(t, tp.P50, tp.P99)
		})
	}
}

// inProcessTCPSystems are the TCP systems that serve and call in a Go
// process (not the external ones: external_test.go).
func inProcessTCPSystems() []string {
	var out []string
	for _, s := range TCPSystems() {
		if !IsExternal(s) {
			out = append(out, s)
		}
	}
	return out
}

func TestLookupUnknown(t *testing.T) {
	_, err := Lookup("nope")
	require.ErrorIs(t, err, ErrUnknownSystem)
}

// BenchmarkEcho is the in-process ATB: server and clients share this
// process, so the cmd/atb-tcp runner is the authoritative comparison; this
// one is for profiling (-cpuprofile) and quick regressions.
func BenchmarkEcho(b *testing.B) {
	for _, name := range inProcessTCPSystems() {
		for _, size := range Sizes {
			for _, conc := range Concurrency {
				b.Run(fmt.Sprintf("%s/%s/c%d", name, SizeLabel(size), conc), func(b *testing.B) {
					benchEcho(b, name, size, conc)
				})
			}
		}
	}
}

func benchEcho(b *testing.B, name string, size, conc int) {
	sys, addr := startSystem(b, name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cs, err := sys.Callers(ctx, addr, conc)
	require.NoError(b, err)
	defer func() { require.NoError(b, CloseAll(cs)) }()
	payload := Payload(size)
	for _, c := range cs { // connect and warm every caller
		_, err := c.Echo(ctx, payload)
		require.NoError(b, err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for i, c := range cs {
		n := b.N / conc
		if i < b.N%conc {
			n++
		}
		wg.Add(1)
		go func(c Caller, n int) {
			defer wg.Done()
			for j := 0; j < n; j++ {
				rep, err := c.Echo(ctx, payload)
				if err == nil {
					err = checkEcho(payload, rep)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(c, n)
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
}
