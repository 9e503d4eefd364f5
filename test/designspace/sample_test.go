//go:build cgo && linux

package designspace

import (
	"fmt"
	"testing"

	"github.com/hatrpc/hatrpc/pkg/hints"
)

// The values of the planning hints the sample covers, on both sides.
var (
	goals     = []hints.Goal{hints.Latency, hints.Throughput, hints.ResUtil}
	pollings  = []hints.Polling{hints.PollAuto, hints.PollBusy, hints.PollEvent, hints.PollAdaptive}
	sharings  = []hints.Switch{hints.SwitchAuto, hints.SwitchOn, hints.SwitchOff}
	explicit  = []hints.Protocol{hints.ProtoEager, hints.ProtoWriteRNDV, hints.ProtoReadRNDV, hints.ProtoDirectWriteSend, hints.ProtoChainedWriteSend, hints.ProtoDirectWriteIMM, hints.ProtoRFP, hints.ProtoHybrid}
	payloads  = []int{0, 64, 1 << 10, 128 << 10} // unknown, tiny, small, large (too large to share)
	batches   = []hints.Batch{4, hints.BatchAuto}
	subLevels = []hints.Subscription{hints.Under, hints.Full, hints.Over}
)

// concurrency is a concurrency hint of subscription level s on cores
// cores (under needs two cores: one caller on one core is full).
func concurrency(s hints.Subscription, cores int) int {
	switch s {
	case hints.Under:
		return max(cores-1, 1)
	case hints.Full:
		return cores
	}
	return 2 * cores
}

// sample is the hint sets the test runs, one function each, chosen so
// that every value of every planning hint occurs on each side, and the
// values that decide a protocol together are crossed:
//
//   - the Fig. 6 grid (perf_goal x subscription) in full on each side,
//     protocol left to the planner, the server in another cell than its
//     client;
//   - every explicit protocol on each side (hybrid included), paired off
//     so that no client protocol meets its own on the server;
//   - polling, qp_sharing and payload_size classes rotated over those
//     rows with periods prime to each other (4, 3, 4 shifted), so each
//     value meets several goals and protocols;
//   - transport pinned to the fast transport on both sides, and to TCP;
//   - batch (a client hint) fixed and automatic, on lanes (not shared).
//
// All combinations would be ~10^7 functions; the planner's decision is a
// function of (goal, subscription, size, transport) plus explicit
// overrides, which this sample crosses where they interact.
func sample(cores int, fast hints.Transport) []hints.Function {
	var out []hints.Function
	add := func(c, s hints.Set) {
		out = append(out, hints.Function{Name: fmt.Sprintf("f%d", len(out)), Client: c, Server: s})
	}
	vary := func(i int, c, s *hints.Set) {
		c.Polling, s.Polling = pollings[i%4], pollings[(i+2)%4]
		c.QPSharing, s.QPSharing = sharings[i%3], sharings[(i+1)%3]
		c.PayloadSize, s.PayloadSize = payloads[i%4], payloads[(i+3)%4]
	}
	for i := range 9 {
		j := (i + 4) % 9
		c := hints.Set{PerfGoal: goals[i/3], Concurrency: concurrency(subLevels[i%3], cores)}
		s := hints.Set{PerfGoal: goals[j/3], Concurrency: concurrency(subLevels[j%3], cores)}
		vary(i, &c, &s)
		add(c, s)
	}
	for i, p := range explicit {
		c := hints.Set{Protocol: p, PerfGoal: goals[i%3], Concurrency: concurrency(subLevels[(i+1)%3], cores)}
		s := hints.Set{Protocol: explicit[(i+3)%len(explicit)], PerfGoal: goals[(i+1)%3], Concurrency: concurrency(subLevels[i%3], cores)}
		vary(i+9, &c, &s)
		add(c, s)
	}
	add(hints.Set{Transport: fast}, hints.Set{Transport: fast, PerfGoal: hints.Throughput})
	add(hints.Set{Transport: hints.TransportTCP, Protocol: hints.ProtoRFP}, hints.Set{})
	for i, b := range batches {
		add(hints.Set{Batch: b, QPSharing: hints.SwitchOff, PerfGoal: goals[i+1]}, hints.Set{Protocol: explicit[i+6]})
	}
	return out
}

// TestSampleCoversEveryValue: the sample holds every value of every
// planning hint on each side, and every Fig. 6 cell on each side.
func TestSampleCoversEveryValue(t *testing.T) {
	cores := 4 // under, full and over all exist
	fns := sample(cores, hints.TransportSHM)
	type key struct {
		side, hint, value string
	}
	seen := map[key]bool{}
	for _, fn := range fns {
		for side, set := range map[string]hints.Set{"client": fn.Client, "server": fn.Server} {
			sub := hints.SubscriptionOf(set.Concurrency, cores)
			for hint, v := range map[string]string{
				"perf_goal": set.PerfGoal.String(), "subscription": sub.String(), "cell": set.PerfGoal.String() + "/" + sub.String(),
				"polling": set.Polling.String(), "qp_sharing": set.QPSharing.String(), "protocol": set.Protocol.String(),
				"payload_size": fmt.Sprint(set.PayloadSize),
			} {
				seen[key{side, hint, v}] = true
			}
			if side == "client" {
				seen[key{side, "transport", set.Transport.String()}] = true
				seen[key{side, "batch", set.Batch.String()}] = true
			}
		}
	}
	for _, side := range []string{"client", "server"} {
		for _, g := range goals {
			for _, s := range subLevels {
				if !seen[key{side, "cell", g.String() + "/" + s.String()}] {
					t.Errorf("%s: no sample in cell %s/%s", side, g, s)
				}
			}
		}
		for _, p := range append([]hints.Protocol{hints.ProtoAuto}, explicit...) {
			if !seen[key{side, "protocol", p.String()}] {
				t.Errorf("%s: protocol %s never sampled", side, p)
			}
		}
		for _, p := range pollings {
			if !seen[key{side, "polling", p.String()}] {
				t.Errorf("%s: polling %s never sampled", side, p)
			}
		}
		for _, q := range sharings {
			if !seen[key{side, "qp_sharing", q.String()}] {
				t.Errorf("%s: qp_sharing %s never sampled", side, q)
			}
		}
		for _, n := range payloads {
			if !seen[key{side, "payload_size", fmt.Sprint(n)}] {
				t.Errorf("%s: payload_size %d never sampled", side, n)
			}
		}
	}
	for _, tr := range []hints.Transport{hints.TransportAuto, hints.TransportSHM, hints.TransportTCP} {
		if !seen[key{"client", "transport", tr.String()}] {
			t.Errorf("transport %s never sampled", tr)
		}
	}
	for _, b := range append([]hints.Batch{hints.BatchOff}, batches...) {
		if !seen[key{"client", "batch", b.String()}] {
			t.Errorf("batch %s never sampled", b)
		}
	}
}
