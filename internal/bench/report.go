package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// SizeLabel renders a payload size the way the report tables do.
func SizeLabel(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// Subject is the system the goals are about; baselines are every system
// whose name starts with BaselinePrefix, and the best of them is the bar.
const (
	Subject        = "hatrpc"
	BaselinePrefix = "apache"
	// TputGoalCallers and TputGoal: at 64 callers HatRPC must do at least
	// twice the operations per second of the best Apache configuration.
	TputGoalCallers = 64
	TputGoal        = 2.0
	// RawPrefix names the physical-floor systems (raw.go): shown next to
	// the others, never a baseline or a subject of a verdict.
	RawPrefix = "raw"
)

// LatencyRow is one (placement, size) point of the 1-client latency table.
type LatencyRow struct {
	Placement string
	Size      int
	By        map[string]LatencyResult
	// Slow sums every repetition's Calls, Elapsed and Over per system
	// (By keeps the best repetition only); nil when read from a CSV.
	Slow map[string]SlowTally
}

// SlowTally is a system's repetitions of one latency point summed: their
// calls, time and calls over each of SlowEdges, how many repetitions
// there were and in how many the p99.9 was within LanesTailGoal of the
// p50 (goal 2 judges one repetition; the count says how often it holds).
type SlowTally struct {
	LatencyResult
	Reps, Within int
}

// addSlow adds a repetition's interruption counts to r.Slow.
func (r *LatencyRow) addSlow(sys string, l LatencyResult) {
	if l.Elapsed <= 0 {
		return
	}
	if r.Slow == nil {
		r.Slow = map[string]SlowTally{}
	}
	t := r.Slow[sys]
	t.Calls += l.Calls
	t.Elapsed += l.Elapsed
	for i := range t.Over {
		t.Over[i] += l.Over[i]
	}
	t.Reps++
	if l.P50 > 0 && float64(l.P999) <= LanesTailGoal*float64(l.P50) {
		t.Within++
	}
	r.Slow[sys] = t
}

// perMs is how many calls per millisecond of calls took longer than
// SlowEdges[i].
func (l LatencyResult) perMs(i int) float64 {
	return float64(l.Over[i]) / (float64(l.Elapsed) / float64(time.Millisecond))
}

// ThroughputRow is one (size, callers) point of the throughput table.
type ThroughputRow struct {
	Size    int
	Callers int
	By      map[string]ThroughputResult
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e3) }

// bestBaseline picks the baseline with the best value according to better.
func bestBaseline[T any](by map[string]T, better func(a, b T) bool) (string, T, bool) {
	var (
		name string
		best T
		ok   bool
	)
	for n, v := range by {
		if !strings.HasPrefix(n, BaselinePrefix) {
			continue
		}
		if !ok || better(v, best) || (!better(best, v) && n < name) {
			name, best, ok = n, v, true
		}
	}
	return name, best, ok
}

// LatencyVerdict compares the subject's p50 to the best baseline p50; the
// goal is a ratio <= 1.
func LatencyVerdict(by map[string]LatencyResult) (ratio float64, baseline string, ok bool) {
	sub, has := by[Subject]
	name, best, hasBase := bestBaseline(by, func(a, b LatencyResult) bool { return a.P50 < b.P50 })
	if !has || !hasBase || best.P50 <= 0 {
		return 0, "", false
	}
	return float64(sub.P50) / float64(best.P50), name, true
}

// ThroughputVerdict compares the subject's ops/s to the best baseline's.
func ThroughputVerdict(by map[string]ThroughputResult) (ratio float64, baseline string, ok bool) {
	sub, has := by[Subject]
	name, best, hasBase := bestBaseline(by, func(a, b ThroughputResult) bool { return a.OpsPerSec() > b.OpsPerSec() })
	if !has || !hasBase || best.OpsPerSec() <= 0 {
		return 0, "", false
	}
	return sub.OpsPerSec() / best.OpsPerSec(), name, true
}

func mark(pass bool) string {
	if pass {
		return "ok"
	}
	return "MISS"
}

// WriteReport prints the latency and throughput tables with the goal
// verdicts of issue 4.
func WriteReport(w io.Writer, systems []string, lat []LatencyRow, tput []ThroughputRow) error {
	fmt.Fprintln(w, "1-client latency in µs (goal: hatrpc p50 <= best apache p50)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := "placement\tsize\t"
	for _, s := range systems {
		hdr += s + " p50\t" + s + " p99\t"
	}
	fmt.Fprintln(tw, hdr+"p50 ratio\tverdict\t")
	for _, r := range lat {
		line := r.Placement + "\t" + SizeLabel(r.Size) + "\t"
		for _, s := range systems {
			if v, ok := r.By[s]; ok {
				line += us(v.P50) + "\t" + us(v.P99) + "\t"
			} else {
				line += "-\t-\t"
			}
		}
		if ratio, base, ok := LatencyVerdict(r.By); ok {
			line += fmt.Sprintf("%.2f vs %s\t%s\t", ratio, base, mark(ratio <= 1))
		} else {
			line += "-\t-\t"
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthroughput in calls/s, unpinned (goal: hatrpc >= %.0fx best apache at %d callers)\n", TputGoal, TputGoalCallers)
	cols := append(append([]string(nil), systems...), "ratio", "verdict")
	err := writePointTable(w, cols, tput, func(r ThroughputRow) []string {
		cells := make([]string, 0, len(cols))
		for _, s := range systems {
			if v, ok := r.By[s]; ok {
				cells = append(cells, fmt.Sprintf("%.0f", v.OpsPerSec()))
			} else {
				cells = append(cells, "-")
			}
		}
		if ratio, base, ok := ThroughputVerdict(r.By); ok {
			verdict := "-"
			if r.Callers == TputGoalCallers {
				verdict = mark(ratio >= TputGoal)
			}
			return append(cells, fmt.Sprintf("%.2fx vs %s", ratio, base), verdict)
		}
		return append(cells, "-", "-")
	})
	if err != nil {
		return err
	}
	if err := writeRawShare(w, systems, tput); err != nil {
		return err
	}
	return writeCPU(w, systems, tput)
}

// writeRawShare prints every system's throughput as a fraction of the best
// raw-TCP system at the same point: how much of what loopback TCP can carry
// here each RPC system gets. Nothing is printed without a raw system.
func writeRawShare(w io.Writer, systems []string, tput []ThroughputRow) error {
	var raws, others []string
	for _, s := range systems {
		if strings.HasPrefix(s, RawPrefix) {
			raws = append(raws, s)
		} else {
			others = append(others, s)
		}
	}
	if len(raws) == 0 || len(others) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nthroughput as a fraction of the best of %s (the TCP floor; no verdict)\n", strings.Join(raws, ", "))
	cols := make([]string, len(others))
	for i, s := range others {
		cols[i] = s + "/raw"
	}
	return writePointTable(w, cols, tput, func(r ThroughputRow) []string {
		best := 0.0
		for _, s := range raws {
			if v, ok := r.By[s]; ok {
				best = max(best, v.OpsPerSec())
			}
		}
		cells := make([]string, len(others))
		for i, s := range others {
			cells[i] = "-"
			if v, ok := r.By[s]; ok && best > 0 {
				cells[i] = fmt.Sprintf("%.2f", v.OpsPerSec()/best)
			}
		}
		return cells
	})
}

// writePointTable prints a table of one line per throughput point: its
// size and callers, then cells(r), one cell per column of cols.
func writePointTable(w io.Writer, cols []string, tput []ThroughputRow, cells func(ThroughputRow) []string) error {
	line := func(a, b string, rest []string) string {
		l := a + "\t" + b + "\t"
		for _, c := range rest {
			l += c + "\t"
		}
		return l
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, line("size", "callers", cols))
	for _, r := range tput {
		fmt.Fprintln(tw, line(SizeLabel(r.Size), fmt.Sprint(r.Callers), cells(r)))
	}
	return tw.Flush()
}
