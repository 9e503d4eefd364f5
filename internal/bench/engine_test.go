package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// ATB points of issue 6: latency from 4 B in powers of 4 plus 512 KiB,
// throughput at 512 B and 128 KiB.
var (
	LatencySizes    = []int{4, 16, 64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 512 << 10}
	ThroughputSizes = []int{512, 128 << 10}
	ThroughputConc  = []int{1, 8, 16, 32, 64}
)

// atbSystems are the engine systems next to HatRPC over TCP loopback.
func atbSystems() []string { return append(EngineSystems(), Subject) }

func engineCallers(tb testing.TB, name, addr string, n, size int) []Caller {
	tb.Helper()
	sys, err := Lookup(name)
	require.NoError(tb, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := callersFor(ctx, sys, addr, n, size)
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, CloseAll(cs)) })
	return cs
}

// TestEngineSmoke echoes through every engine system at sizes that hit
// each protocol's inline, eager, direct-buffer and rendezvous paths, with
// one caller (busy polling) and with several at once (event polling), and
// checks every reply byte by SHA-256.
func TestEngineSmoke(t *testing.T) {
	sizes := []int{0, 4, 64, 4<<10 + 1, 64<<10 + 1, 512 << 10}
	for _, name := range EngineSystems() {
		t.Run(name, func(t *testing.T) {
			_, addr := startSystem(t, name)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for _, size := range sizes {
				c := engineCallers(t, name, addr, 1, size)[0]
				p := Payload(size)
				for i := 0; i < 3; i++ {
					rep, err := c.Echo(ctx, p)
					require.NoError(t, err, "size %d", size)
					require.Equal(t, sha256.Sum256(p), sha256.Sum256(rep), "size %d call %d", size, i)
				}
			}

			const conc = 4
			cs := engineCallers(t, name, addr, conc, 128<<10)
			var wg sync.WaitGroup
			errs := make([]error, conc)
			for i, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// A payload per caller, so a reply routed to the wrong
					// caller fails its checksum.
					p := Payload(128<<10 + i)
					for j := 0; j < 5 && errs[i] == nil; j++ {
						rep, err := c.Echo(ctx, p)
						if err == nil && sha256.Sum256(p) != sha256.Sum256(rep) {
							err = fmt.Errorf("caller %d call %d: %w", i, j, ErrEchoMismatch)
						}
						errs[i] = err
					}
				}()
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
		})
	}
}

func TestEngineSetup(t *testing.T) {
	cores := runtime.NumCPU()
	for _, size := range []int{64, 128 << 10} {
		env := hints.Env{Cores: cores, PeerPollsMemory: true}
		lat := hints.TableFor(PlanSet(hints.Latency, size, 1), env)
		tput := hints.TableFor(PlanSet(hints.Throughput, size, 1), env)
		assert.Equal(t, lat.LaneRowFor(size), tput.LaneRowFor(size), "one caller: both goals plan alike")
	}
	p, poll := Describe(Engine{Proto: rdma.ProtoEager}.Name(), 64, 1)
	assert.Equal(t, "eager", p)
	assert.Equal(t, "busy", poll)
	_, poll = Describe(Engine{Proto: rdma.ProtoEager}.Name(), 64, 64)
	assert.Equal(t, "event", poll, "64 spinning callers would collapse on few cores")
	p, _ = Describe(Subject, 64, 1)
	assert.Equal(t, "tcp", p)
	assert.Equal(t, "tcp", providerOf(Subject))
	p, poll = Describe(Hat{Lanes: true}.Name(), 64, 1)
	assert.Equal(t, "lanes", p, "the runtime on lanes runs on the engine, not TCP")
	assert.Equal(t, "-", poll)
	assert.Equal(t, providerOfPrefix(EnginePrefix()), providerOf(Hat{Lanes: true}.Name()))
	s := Engine{Proto: rdma.ProtoRFP, RFPFetch: true}.Setup(64, 1)
	assert.Equal(t, rfpFetchRetries, s.Config.RFPRetries)
	assert.Len(t, EngineSystems(), len(rdma.Protocols())+2)
	assert.NotContains(t, TCPSystems(), Engine{Planned: true}.Name())
}

// BenchmarkATBLatency is the 1-caller latency of issue 6 in one process,
// engine systems next to HatRPC over TCP loopback: p50/p99 in µs of the
// b.N recorded calls (cmd/atb runs client and server as separate
// processes).
//
//	go test ./internal/bench -run '^$' -bench ATBLatency -benchtime 5000x
func BenchmarkATBLatency(b *testing.B) {
	for _, name := range atbSystems() {
		b.Run(name, func(b *testing.B) {
			_, addr := startSystem(b, name)
			for _, size := range LatencySizes {
				b.Run(SizeLabel(size), func(b *testing.B) { benchLatency(b, name, addr, size) })
			}
		})
	}
}

// logSetup labels a benchmark with what its metrics cannot say.
func logSetup(b *testing.B, name string, size, callers int) {
	proto, poll := Describe(name, size, callers)
	b.Logf("provider=%s protocol=%s polling=%s", providerOf(name), proto, poll)
}

func benchLatency(b *testing.B, name, addr string, size int) {
	logSetup(b, name, size, 1)
	c := engineCallers(b, name, addr, 1, size)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The caller spins in C under busy polling; on its own thread it does
	// not starve the server's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	payload := Payload(size)
	for i := 0; i < 100; i++ { // pools, page faults, caches
		rep, err := c.Echo(ctx, payload)
		require.NoError(b, err)
		require.NoError(b, checkEcho(payload, rep))
	}
	lat := make([]time.Duration, b.N)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := range lat {
		t0 := time.Now()
		rep, err := c.Echo(ctx, payload)
		lat[i] = time.Since(t0)
		if err == nil {
			err = checkEcho(payload, rep)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-us")
}

// BenchmarkATBThroughput is the closed-loop throughput of issue 6 in one
// process: b.N calls spread over N callers (N endpoint pairs for the
// engine, one shared pipelined connection for hatrpc).
//
//	go test ./internal/bench -run '^$' -bench ATBThroughput -benchtime 2s
func BenchmarkATBThroughput(b *testing.B) {
	for _, name := range atbSystems() {
		b.Run(name, func(b *testing.B) {
			_, addr := startSystem(b, name)
			for _, size := range ThroughputSizes {
				for _, conc := range ThroughputConc {
					b.Run(fmt.Sprintf("%s/c%d", SizeLabel(size), conc), func(b *testing.B) {
						benchThroughput(b, name, addr, size, conc)
					})
				}
			}
		})
	}
}

func benchThroughput(b *testing.B, name, addr string, size, conc int) {
	logSetup(b, name, size, conc)
	cs := engineCallers(b, name, addr, conc, size)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	payload := Payload(size)
	for _, c := range cs {
		rep, err := c.Echo(ctx, payload)
		require.NoError(b, err)
		require.NoError(b, checkEcho(payload, rep))
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, conc)
	for i, c := range cs {
		n := b.N / conc
		if i < b.N%conc {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < n && errs[i] == nil; j++ {
				rep, err := c.Echo(ctx, payload)
				if err == nil {
					err = checkEcho(payload, rep)
				}
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for _, err := range errs {
		require.NoError(b, err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
}
