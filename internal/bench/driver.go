package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Driver runs the multi-process ATB: for every placement and system a
// server process, then one client process per measurement point.
type Driver struct {
	Systems    []string
	Placements []Placement
	Sizes      []int
	Callers    []int // throughput points
	// TputPlacement pins the throughput runs (zero value: unpinned).
	TputPlacement Placement
	Calls         int // recorded latency calls
	Warmup        int
	// WarmupFor keeps a latency run's warm-up going at least this long
	// (see ClientSpec.WarmupFor).
	WarmupFor time.Duration
	Dur       time.Duration
	Reps      int       // measurements per point; the best is kept
	Log       io.Writer // progress lines; nil = silent
	// Settle is the pause before each measurement. A busy-polling server
	// keeps spinning for a while after its last call (pkg/rdma bounds it
	// to 20 ms), so without a pause the system measured next would share
	// the CPUs with the one measured before it.
	Settle time.Duration
	// Gate, when set, holds each measurement until the host is out of a
	// slow phase (hostphase.go) and has the line's round trip logged
	// before and after it; nil: no check.
	Gate *HostGate
	// Stamps, when set, receives each latency repetition's slow calls
	// placed in time (stamps.go), for TraceReport.
	Stamps io.Writer

	pids map[string]int // server process per system, set by withServers
}

// DefaultWarmupFor is atb's least latency warm-up: sysmon is back to
// millisecond sleeps ~10 ms after a process or lane starts, and per-call
// garbage of a few hundred bytes reaches the first GC (4 MiB) within
// ~40 ms of 2 µs calls.
const DefaultWarmupFor = 50 * time.Millisecond

// DefaultSettle is the pause the runners use.
const DefaultSettle = 50 * time.Millisecond

// order is the order the systems take turns in during repetition rep: a
// rotation, so no system always runs right after the same neighbour or at
// the same place in the round (the first and last of a round see other
// load than the middle).
func (d *Driver) order(rep int) []string {
	n := len(d.Systems)
	out := make([]string, n)
	for i := range n {
		out[i] = d.Systems[(i+rep)%n]
	}
	return out
}

func (d *Driver) settle(ctx context.Context) error {
	if d.Settle <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d.Settle)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hostReady waits (Gate) for the host to leave a slow phase and says what it saw,
// for the measurement's log line. A host where the line cannot be probed
// turns the gate off, once, with the reason.
func (d *Driver) hostReady(ctx context.Context) (string, error) {
	if d.Gate == nil {
		return "", nil
	}
	rtt, waited, ok, err := d.Gate.Ready(ctx)
	if err != nil {
		return d.gateOff(ctx, err)
	}
	note := fmt.Sprintf(" line %v", rtt)
	if !ok {
		note += fmt.Sprintf(" (still slow after %v: typical %v)", waited.Round(time.Second), d.Gate.Typical())
	} else if waited > 0 {
		note += fmt.Sprintf(" (waited %v for a typical one)", waited.Round(100*time.Millisecond))
	}
	return note, nil
}

// hostAfter probes once after a measurement: a phase that began during it
// shows as a slow line here.
func (d *Driver) hostAfter(ctx context.Context) (string, error) {
	if d.Gate == nil {
		return "", nil
	}
	rtt, ok, err := d.Gate.Check(ctx)
	if err != nil {
		return d.gateOff(ctx, err)
	}
	if !ok {
		return fmt.Sprintf("/%v (slow: typical %v)", rtt, d.Gate.Typical()), nil
	}
	return fmt.Sprintf("/%v", rtt), nil
}

func (d *Driver) gateOff(ctx context.Context, err error) (string, error) {
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	d.logf("host check off: %v", err)
	d.Gate = nil
	return "", nil
}

func (d *Driver) logf(format string, args ...any) {
	if d.Log != nil {
		fmt.Fprintf(d.Log, format+"\n", args...)
	}
}

// Run measures everything and returns the table rows in a stable order.
// Every point is measured Reps times, the systems taking turns, and the
// best run is kept (lowest p50, highest calls/s): on a shared machine other
// load only ever makes a run slower, so the best of several interleaved
// runs is the fairest estimate of what each system costs.
func (d *Driver) Run(ctx context.Context) ([]LatencyRow, []ThroughputRow, error) {
	for _, s := range d.Systems {
		if _, err := Lookup(s); err != nil {
			return nil, nil, err
		}
	}
	reps := max(d.Reps, 1)
	var lat []LatencyRow
	for _, p := range d.Placements {
		rows := make([]LatencyRow, len(d.Sizes))
		for i, size := range d.Sizes {
			rows[i] = LatencyRow{Placement: p.Name, Size: size, By: map[string]LatencyResult{}}
		}
		err := d.withServers(ctx, p.ServerCPU, false, func(addrs map[string]string) error {
			for rep := 0; rep < reps; rep++ {
				for i, size := range d.Sizes {
					for _, sys := range d.order(rep + i) {
						if err := d.settle(ctx); err != nil {
							return err
						}
						before, err := d.hostReady(ctx)
						if err != nil {
							return err
						}
						res, err := RunClientProcess(ctx, ClientSpec{
							System: sys, Addr: addrs[sys], Size: size, Warmup: d.Warmup, WarmupFor: d.WarmupFor, Calls: d.Calls,
							Stamps: d.Stamps != nil,
						}, p.ClientCPU)
						if err != nil {
							return err
						}
						if st := res.Latency.Stamps; st != nil {
							// Written and dropped: the rows keep figures only.
							if err := writeStamps(d.Stamps, sys, size, rep, st); err != nil {
								return fmt.Errorf("stamps: %w", err)
							}
							res.Latency.Stamps = nil
						}
						after, err := d.hostAfter(ctx)
						if err != nil {
							return err
						}
						l := *res.Latency
						rows[i].addSlow(sys, l)
						if old, ok := rows[i].By[sys]; !ok || l.P50 < old.P50 {
							rows[i].By[sys] = l
						}
						d.logf("latency %-9s %-16s %7s rep %d p50=%v p99=%v p99.9=%v over %s%s%s", p.Name, sys, SizeLabel(size), rep, l.P50, l.P99, l.P999, overText(l.Over), before, after)
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		lat = append(lat, rows...)
	}

	var tput []ThroughputRow
	if len(d.Callers) == 0 {
		return lat, nil, nil
	}
	for _, size := range d.Sizes {
		for _, c := range d.Callers {
			tput = append(tput, ThroughputRow{Size: size, Callers: c, By: map[string]ThroughputResult{}})
		}
	}
	tp := d.TputPlacement
	err := d.withServers(ctx, tp.ServerCPU, true, func(addrs map[string]string) error {
		for rep := 0; rep < reps; rep++ {
			for i := range tput {
				row := &tput[i]
				for _, sys := range d.order(rep + i) {
					if LatencyOnly(sys) {
						continue
					}
					if err := d.settle(ctx); err != nil {
						return err
					}
					before, err := d.hostReady(ctx)
					if err != nil {
						return err
					}
					res, err := RunClientProcess(ctx, ClientSpec{
						System: sys, Addr: addrs[sys], Size: row.Size, Callers: row.Callers, Duration: d.Dur,
						ServerPID: d.pids[sys],
					}, tp.ClientCPU)
					if err != nil {
						return err
					}
					after, err := d.hostAfter(ctx)
					if err != nil {
						return err
					}
					r := *res.Throughput
					if old, ok := row.By[sys]; !ok || r.OpsPerSec() > old.OpsPerSec() {
						row.By[sys] = r
					}
					c, s := r.CPUPerCall()
					d.logf("tput    %-16s %7s c=%-3d rep %d %.0f calls/s cpu/call %s+%s µs%s%s", sys, SizeLabel(row.Size), row.Callers, rep, r.OpsPerSec(), us(c), us(s), before, after)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return lat, tput, nil
}

// withServers starts one server process per system, all pinned to cpu
// (for a throughput sweep (tput) none for a latency-only system), runs f
// with their addresses and stops them.
func (d *Driver) withServers(ctx context.Context, cpu string, tput bool, f func(addrs map[string]string) error) (err error) {
	addrs := map[string]string{}
	d.pids = map[string]int{}
	var started []*RemoteServer
	defer func() {
		for _, s := range started {
			if serr := s.Stop(); err == nil {
				err = serr
			}
		}
	}()
	for _, sys := range d.Systems {
		if tput && LatencyOnly(sys) {
			continue
		}
		srv, err := StartServerProcess(ctx, sys, cpu)
		if err != nil {
			return err
		}
		started = append(started, srv)
		addrs[sys] = srv.Addr
		d.pids[sys] = srv.PID
	}
	return f(addrs)
}
