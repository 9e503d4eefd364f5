package bench

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Goals of issue 6.
const (
	LatencyGoalSize = 64
	LatencyGoalP50  = 5.0 // µs, engine p50 at LatencyGoalSize
	SpeedupGoalSize = 128 << 10
	SpeedupGoal     = 5.0  // engine calls/s over TCP at SpeedupGoalSize
	PlannedSlack    = 0.05 // planned within 5% of the best fixed protocol
)

// Issue 47's goals on the lanes (the whole runtime) against the engine.
const (
	// LanesGoalVsEngine bounds the lanes' 64 B p50 over the best engine
	// system's.
	LanesGoalVsEngine = 1.2
	// LanesTailGoal bounds the lanes' 64 B p99.9 over their own p50.
	LanesTailGoal = 5.0
	// LanesLargeGoal is the lanes' share of the best engine system's
	// calls/s at SpeedupGoalSize, at each of LanesLargeCallers.
	LanesLargeGoal = 0.9
)

// LanesLargeCallers are the caller counts issue 47's goal 3 names.
var LanesLargeCallers = []int{8, 16, 64}

func usf(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func toUS(d int64) float64 { return float64(d) / 1e3 }

// MBPerSec is the payload volume one way, in 10^6 bytes per second.
func MBPerSec(r ThroughputResult, size int) float64 { return r.OpsPerSec() * float64(size) / 1e6 }

// WriteLatencyCSV writes system,protocol,size,p50_us,p99_us,mean_us (and
// the polling mode, provider and p99.9) for every measured point; p999_us
// comes last so CSV files written before it existed still read.
func WriteLatencyCSV(w io.Writer, systems []string, rows []LatencyRow) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"system", "protocol", "size", "p50_us", "p99_us", "mean_us", "polling", "provider", "p999_us"})
	for _, r := range rows {
		for _, s := range systems {
			v, ok := r.By[s]
			if !ok {
				continue
			}
			proto, poll := Describe(s, r.Size, 1)
			_ = cw.Write([]string{s, proto, strconv.Itoa(r.Size), usf(toUS(int64(v.P50))), usf(toUS(int64(v.P99))),
				usf(toUS(int64(v.Mean))), poll, providerOf(s), usf(toUS(int64(v.P999)))})
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteThroughputCSV writes system,size,clients,calls_per_s,mb_per_s (and
// the protocol, polling mode and provider) for every measured point.
func WriteThroughputCSV(w io.Writer, systems []string, rows []ThroughputRow) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"system", "size", "clients", "calls_per_s", "mb_per_s", "protocol", "polling", "provider"})
	for _, r := range rows {
		for _, s := range systems {
			v, ok := r.By[s]
			if !ok {
				continue
			}
			proto, poll := Describe(s, r.Size, r.Callers)
			_ = cw.Write([]string{s, strconv.Itoa(r.Size), strconv.Itoa(r.Callers), usf(v.OpsPerSec()),
				usf(MBPerSec(v, r.Size)), proto, poll, providerOf(s)})
		}
	}
	cw.Flush()
	return cw.Error()
}

func providerOf(system string) string {
	if system = BaseName(system); IsEngineSystem(system) || system == lanesName {
		return providerOfPrefix(EnginePrefix())
	}
	if isUCX(system) {
		return "ucx-sm"
	}
	if IsFloor(system) {
		return "memory"
	}
	return "tcp"
}

// PlotLatency draws p50 latency against payload size, log-log, one line
// per system (HatRPC paper, Fig. 8 style).
func PlotLatency(w io.Writer, systems []string, rows []LatencyRow) error {
	p := plot.New()
	p.Title.Text = "ATB 1-caller echo latency (p50)"
	p.X.Label.Text = "payload (bytes)"
	p.Y.Label.Text = "p50 latency (µs)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var lines []any
	for _, s := range systems {
		var xys plotter.XYs
		for _, r := range rows {
			if v, ok := r.By[s]; ok && v.P50 > 0 {
				xys = append(xys, plotter.XY{X: float64(r.Size), Y: toUS(int64(v.P50))})
			}
		}
		if len(xys) > 0 {
			lines = append(lines, s, xys)
		}
	}
	return writePlot(w, p, lines)
}

// PlotThroughput draws calls/s against the number of callers for one
// payload size, one line per system (HatRPC paper, Fig. 9 style).
func PlotThroughput(w io.Writer, systems []string, rows []ThroughputRow, size int) error {
	p := plot.New()
	p.Title.Text = "ATB closed-loop throughput, " + SizeLabel(size) + " payload"
	p.X.Label.Text = "concurrent callers"
	p.Y.Label.Text = "calls/s"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	if size >= 64<<10 {
		p.Y.Label.Text = "calls/s (× " + SizeLabel(size) + " = payload volume)"
	}
	var lines []any
	for _, s := range systems {
		var xys plotter.XYs
		for _, r := range rows {
			if v, ok := r.By[s]; ok && r.Size == size {
				xys = append(xys, plotter.XY{X: float64(r.Callers), Y: v.OpsPerSec()})
			}
		}
		if len(xys) > 0 {
			lines = append(lines, s, xys)
		}
	}
	return writePlot(w, p, lines)
}

func writePlot(w io.Writer, p *plot.Plot, lines []any) error {
	if len(lines) == 0 {
		return fmt.Errorf("bench: nothing measured to plot")
	}
	p.Add(plotter.NewGrid())
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	fitLogAxis(&p.X)
	fitLogAxis(&p.Y)
	p.Legend.Top = true
	p.Legend.Left = true
	wt, err := p.WriterTo(9*vg.Inch, 6*vg.Inch, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// fitLogAxis keeps a log axis drawable whatever the sweep measured. With
// one distinct value (one size, one caller count) gonum widens the range
// by ±1, which crosses zero below 1 (one caller: 0..2) and panics in
// LogScale; the range is widened by a factor of two instead. An axis with
// a value <= 0 cannot be logarithmic at all and becomes linear.
func fitLogAxis(a *plot.Axis) {
	if _, ok := a.Scale.(plot.LogScale); !ok {
		return
	}
	switch {
	case a.Min <= 0 || math.IsInf(a.Min, 0) || math.IsNaN(a.Min):
		a.Scale, a.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
	case a.Min == a.Max:
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}

// sizeTicks labels powers of two in bytes.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for n := 1; float64(n) <= hi*1.0001; n *= 4 {
		if float64(n) >= lo*0.9999 {
			ticks = append(ticks, plot.Tick{Value: float64(n), Label: SizeLabel(n)})
		}
	}
	return ticks
}

// fixedEngine reports whether s is an engine system with a fixed protocol.
func fixedEngine(s string) bool {
	e, ok := engineSystems[s]
	return ok && !e.Planned
}

func plannedName() string { return Engine{Planned: true}.Name() }

// WriteEngineLatencyTable writes the latency table as Markdown: p50/p99/p99.9 in
// µs per system (rows) and size (columns), then the planned system's
// verdict per size.
func WriteEngineLatencyTable(w io.Writer, systems []string, rows []LatencyRow) {
	hdr := "| system (protocol, polling) |"
	sep := "|---|"
	for _, r := range rows {
		hdr += " " + SizeLabel(r.Size) + " |"
		sep += "---:|"
	}
	fmt.Fprintln(w, hdr)
	fmt.Fprintln(w, sep)
	for _, s := range systems {
		line := "| " + systemLabel(s, rows[0].Size, 1) + " |"
		for _, r := range rows {
			if v, ok := r.By[s]; ok {
				line += fmt.Sprintf(" %.1f / %s / %s |", toUS(int64(v.P50)), tailUS(v.P99), tailUS(v.P999))
			} else {
				line += " - |"
			}
		}
		fmt.Fprintln(w, line)
	}
	line := "| planned protocol |"
	for _, r := range rows {
		p, _ := Describe(plannedName(), r.Size, 1)
		line += " " + p + " |"
	}
	fmt.Fprintln(w, line)
	line = "| planned / best fixed p50 |"
	for _, r := range rows {
		ratio, best, ok := plannedLatencyRatio(r)
		if !ok {
			line += " - |"
			continue
		}
		line += fmt.Sprintf(" %s (%s) %s |", ratioText(ratio, 1+PlannedSlack), short(best), mark(ratio <= 1+PlannedSlack))
	}
	fmt.Fprintln(w, line)
	// Against the fixed system running the plan's protocol: the planner's
	// other settings plus noise, where the row above is the choice itself.
	line = "| planned / same protocol p50 |"
	for _, r := range rows {
		line += " " + sameProtoCell(r.By, r.Size, 1, func(v LatencyResult) float64 { return float64(v.P50) }) + " |"
	}
	fmt.Fprintln(w, line)
}

// sameProtoCell is planned's value over that of the fixed system with the
// protocol the plan picked (RFP: the default-R system, as the plan's R).
func sameProtoCell[T any](by map[string]T, size, callers int, val func(T) float64) string {
	proto, _ := Describe(plannedName(), size, callers)
	same := EnginePrefix() + "-" + proto
	pl, ok1 := by[plannedName()]
	fx, ok2 := by[same]
	if !ok1 || !ok2 || val(fx) <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", val(pl)/val(fx))
}

func short(system string) string {
	_, after, ok := strings.Cut(system, "-")
	if ok && IsEngineSystem(system) {
		return after
	}
	return system
}

// systemLabel names a system and how it runs; a baseline system (see
// BaselineSuffix) as its name's system in this build.
func systemLabel(s string, size, callers int) string {
	base := BaseName(s)
	proto, poll := Describe(base, size, callers)
	if sys, err := Lookup(base); err == nil {
		if x, ok := sys.(interface{ describe() string }); ok {
			return s + " (" + x.describe() + ")"
		}
	}
	switch {
	case base == (Hat{Lanes: true}).Name():
		return s + " (pkg/server + pkg/client on engine lanes, atb.thrift's hints)"
	case !IsEngineSystem(base):
		return s + " (TCP loopback)"
	case base == plannedName():
		return s + " (hints.TableFor, " + poll + ")"
	}
	return s + " (" + proto + ", " + poll + ")"
}

func plannedLatencyRatio(r LatencyRow) (float64, string, bool) {
	pl, ok := r.By[plannedName()]
	if !ok {
		return 0, "", false
	}
	best, bestName := math.Inf(1), ""
	for s, v := range r.By {
		if fixedEngine(s) && (float64(v.P50) < best || float64(v.P50) == best && s < bestName) {
			best, bestName = float64(v.P50), s
		}
	}
	if bestName == "" || best <= 0 {
		return 0, "", false
	}
	return float64(pl.P50) / best, bestName, true
}

func plannedThroughputRatio(r ThroughputRow) (float64, string, bool) {
	pl, ok := r.By[plannedName()]
	if !ok {
		return 0, "", false
	}
	best, bestName := 0.0, ""
	for s, v := range r.By {
		if fixedEngine(s) && (v.OpsPerSec() > best || v.OpsPerSec() == best && s < bestName) {
			best, bestName = v.OpsPerSec(), s
		}
	}
	if bestName == "" {
		return 0, "", false
	}
	return pl.OpsPerSec() / best, bestName, true
}

// WriteEngineThroughputTable writes calls/s per system (rows) and caller
// count (columns) for one size, the planned verdict and, against TCP, the
// best engine system's speedup.
func WriteEngineThroughputTable(w io.Writer, systems []string, rows []ThroughputRow, size int) {
	var rs []ThroughputRow
	for _, r := range rows {
		if r.Size == size {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return
	}
	hdr, sep := "| "+SizeLabel(size)+": calls/s |", "|---|"
	for _, r := range rs {
		hdr += fmt.Sprintf(" c%d |", r.Callers)
		sep += "---:|"
	}
	fmt.Fprintln(w, hdr)
	fmt.Fprintln(w, sep)
	for _, s := range systems {
		line := "| " + s + " |"
		for _, r := range rs {
			if v, ok := r.By[s]; ok {
				line += fmt.Sprintf(" %.0f |", v.OpsPerSec())
			} else {
				line += " - |"
			}
		}
		fmt.Fprintln(w, line)
	}
	line := "| polling (engine) |"
	for _, r := range rs {
		_, poll := Describe(plannedName(), size, r.Callers)
		line += " " + poll + " |"
	}
	fmt.Fprintln(w, line)
	line = "| planned protocol |"
	for _, r := range rs {
		p, _ := Describe(plannedName(), size, r.Callers)
		line += " " + p + " |"
	}
	fmt.Fprintln(w, line)
	line = "| planned / best fixed |"
	for _, r := range rs {
		ratio, best, ok := plannedThroughputRatio(r)
		if !ok {
			line += " - |"
			continue
		}
		line += fmt.Sprintf(" %s (%s) %s |", ratioText(ratio, 1-PlannedSlack), short(best), mark(ratio >= 1-PlannedSlack))
	}
	fmt.Fprintln(w, line)
	line = "| planned / same protocol |"
	for _, r := range rs {
		line += " " + sameProtoCell(r.By, size, r.Callers, ThroughputResult.OpsPerSec) + " |"
	}
	fmt.Fprintln(w, line)
	line = "| best engine / TCP |"
	for _, r := range rs {
		line += " " + speedupCell(r) + " |"
	}
	fmt.Fprintln(w, line)
}

func speedupCell(r ThroughputRow) string {
	tcp, ok := r.By[Subject]
	if !ok || tcp.OpsPerSec() <= 0 {
		return "-"
	}
	best, bestName := 0.0, ""
	for s, v := range r.By {
		if IsEngineSystem(s) && v.OpsPerSec() > best {
			best, bestName = v.OpsPerSec(), s
		}
	}
	if bestName == "" {
		return "-"
	}
	ratio := best / tcp.OpsPerSec()
	verdict := ""
	if r.Size == SpeedupGoalSize {
		verdict = " " + mark(ratio >= SpeedupGoal)
	}
	return fmt.Sprintf("%.1fx (%s)%s", ratio, short(bestName), verdict)
}

// WriteEngineVerdicts summarises the three goals of issue 6 and issue
// 47's on the engine and the lanes (goal 1 when UCX was measured).
func WriteEngineVerdicts(w io.Writer, lat []LatencyRow, tput []ThroughputRow) {
	for _, r := range lat {
		if r.Size != LatencyGoalSize {
			continue
		}
		writeUCXVerdict(w, r)
		bestName, best := bestEngineP50(r)
		if pl, ok := r.By[plannedName()]; ok {
			fmt.Fprintf(w, "- %s p50 < %.0f µs: best engine %s %.2f µs, planned %.2f µs, TCP %s µs: **%s**\n",
				SizeLabel(r.Size), LatencyGoalP50, short(bestName), toUS(int64(best)), toUS(int64(pl.P50)),
				tcpP50(r), mark(toUS(int64(pl.P50)) < LatencyGoalP50))
		}
	}
	var cells []string
	pass := true
	for _, r := range tput {
		if r.Size != SpeedupGoalSize {
			continue
		}
		cells = append(cells, fmt.Sprintf("c%d %s", r.Callers, speedupCell(r)))
		if !strings.HasSuffix(speedupCell(r), "ok") {
			pass = false
		}
	}
	if len(cells) > 0 {
		fmt.Fprintf(w, "- %s engine ≥ %.0fx TCP calls/s: %s: **%s**\n", SizeLabel(SpeedupGoalSize), SpeedupGoal,
			strings.Join(cells, "; "), mark(pass))
	}
	n, miss := 0, []string{}
	for _, r := range lat {
		if ratio, _, ok := plannedLatencyRatio(r); ok {
			n++
			if ratio > 1+PlannedSlack {
				miss = append(miss, fmt.Sprintf("latency %s %.2f", SizeLabel(r.Size), ratio))
			}
		}
	}
	for _, r := range tput {
		if ratio, _, ok := plannedThroughputRatio(r); ok {
			n++
			if ratio < 1-PlannedSlack {
				miss = append(miss, fmt.Sprintf("%s c%d %.2f", SizeLabel(r.Size), r.Callers, ratio))
			}
		}
	}
	if n > 0 {
		fmt.Fprintf(w, "- planned within %.0f%% of the best fixed protocol: %d of %d cells", PlannedSlack*100, n-len(miss), n)
		if len(miss) > 0 {
			fmt.Fprintf(w, "; misses: %s", strings.Join(miss, ", "))
		}
		fmt.Fprintf(w, ": **%s**\n", mark(len(miss) == 0))
	}
	writeLanesGoals(w, lat, tput)
}

// bestEngineP50 is the engine system with the lowest p50 in r (on a tie
// the first by name), "" when r has none.
func bestEngineP50(r LatencyRow) (string, time.Duration) {
	name, best := "", time.Duration(0)
	for s, v := range r.By {
		if IsEngineSystem(s) && (name == "" || v.P50 < best || v.P50 == best && s < name) {
			name, best = s, v.P50
		}
	}
	return name, best
}

// writeUCXVerdict is issue 47's goal 1 at one size: the best engine
// system's p50 at most UCX's shared-memory round trip (the better of
// ucx_perftest's tag and am latency), and the lanes within
// LanesGoalVsEngine of the best engine system.
func writeUCXVerdict(w io.Writer, r LatencyRow) {
	bestName, best := bestEngineP50(r)
	ucx, ucxName := time.Duration(math.MaxInt64), ""
	for s, v := range r.By {
		if isUCX(s) && v.P50 < ucx {
			ucx, ucxName = v.P50, s
		}
	}
	if ucxName == "" || bestName == "" || ucx <= 0 {
		return
	}
	ratio := float64(best) / float64(ucx)
	fmt.Fprintf(w, "- %s engine p50 ≤ UCX shared-memory round trip: best engine %s %.2f µs, %s %.2f µs, %s×: **%s**\n",
		SizeLabel(r.Size), short(bestName), toUS(int64(best)), ucxName, toUS(int64(ucx)), ratioText(ratio, 1), mark(ratio <= 1))
	if l, ok := r.By[(Hat{Lanes: true}).Name()]; ok {
		lr := float64(l.P50) / float64(best)
		fmt.Fprintf(w, "- %s lanes p50 ≤ %.1f× best engine: %.2f µs, %s×: **%s**\n",
			SizeLabel(r.Size), LanesGoalVsEngine, toUS(int64(l.P50)), ratioText(lr, LanesGoalVsEngine), mark(lr <= LanesGoalVsEngine))
	}
}

// tailUS prints a p99 or p99.9 to two significant digits at least: a
// sub-microsecond tail printed as "0" read as a tail below the median.
func tailUS(d time.Duration) string {
	if us := toUS(int64(d)); us < 10 {
		return strconv.FormatFloat(us, 'f', 1, 64)
	}
	return strconv.FormatFloat(toUS(int64(d)), 'f', 0, 64)
}

// writeLanesGoals is issue 47's goals 2 and 3: the lanes' 64 B p99.9
// within LanesTailGoal of their p50, and the lanes at SpeedupGoalSize
// within LanesLargeGoal of the best engine system at LanesLargeCallers.
func writeLanesGoals(w io.Writer, lat []LatencyRow, tput []ThroughputRow) {
	lanes := (Hat{Lanes: true}).Name()
	for _, r := range lat {
		if l, ok := r.By[lanes]; ok && r.Size == LatencyGoalSize && l.P50 > 0 {
			ratio := float64(l.P999) / float64(l.P50)
			var floors []string
			for _, f := range floorsOf(r) {
				v := r.By[f]
				t := fmt.Sprintf("%s: p50 %.2f, p99.9 %.2f µs", f, toUS(int64(v.P50)), toUS(int64(v.P999)))
				if f != FloorName && v.P50 > 0 {
					t += fmt.Sprintf(", %.1f×%s", float64(v.P999)/float64(v.P50), withinText(r, f))
				}
				floors = append(floors, t)
			}
			floor := ""
			if len(floors) > 0 {
				floor = " (the host's " + strings.Join(floors, "; ") + ")"
			}
			fmt.Fprintf(w, "- %s lanes p99.9 ≤ %.0f× their p50: %.2f / %.2f µs, %.1f×%s%s: **%s**\n",
				SizeLabel(r.Size), LanesTailGoal, toUS(int64(l.P999)), toUS(int64(l.P50)), ratio, withinText(r, lanes), floor, mark(ratio <= LanesTailGoal))
			writeSlowRates(w, r, lanes)
		}
	}
	var cells []string
	pass := true
	for _, r := range tput {
		l, ok := r.By[lanes]
		if !ok || r.Size != SpeedupGoalSize || !slices.Contains(LanesLargeCallers, r.Callers) {
			continue
		}
		best, bestName := 0.0, ""
		for s, v := range r.By {
			if IsEngineSystem(s) && (v.OpsPerSec() > best || v.OpsPerSec() == best && s < bestName) {
				best, bestName = v.OpsPerSec(), s
			}
		}
		if bestName == "" || best <= 0 {
			continue
		}
		ratio := l.OpsPerSec() / best
		pass = pass && ratio >= LanesLargeGoal
		cells = append(cells, fmt.Sprintf("c%d %s (%s)", r.Callers, ratioText(ratio, LanesLargeGoal), short(bestName)))
	}
	if len(cells) > 0 {
		fmt.Fprintf(w, "- %s lanes ≥ %.1f× best engine calls/s: %s: **%s**\n",
			SizeLabel(SpeedupGoalSize), LanesLargeGoal, strings.Join(cells, "; "), mark(pass))
	}
}

func tcpP50(r LatencyRow) string {
	if v, ok := r.By[Subject]; ok {
		return fmt.Sprintf("%.1f", toUS(int64(v.P50)))
	}
	return "-"
}

// ReadLatencyCSV reads what WriteLatencyCSV wrote: rows in size order and
// the systems in first-seen order (µs to ns at the CSV's 10 ns precision).
func ReadLatencyCSV(r io.Reader) ([]string, []LatencyRow, error) {
	recs, err := readCSV(r, "p50_us")
	if err != nil {
		return nil, nil, err
	}
	var (
		systems []string
		rows    []LatencyRow
		bySize  = map[int]int{}
	)
	for _, rec := range recs {
		size, err1 := strconv.Atoi(rec[2])
		p50, err2 := strconv.ParseFloat(rec[3], 64)
		p99, err3 := strconv.ParseFloat(rec[4], 64)
		mean, err4 := strconv.ParseFloat(rec[5], 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, nil, fmt.Errorf("bench: latency.csv %v: %w", rec, err)
		}
		systems = appendNew(systems, rec[0])
		i, ok := bySize[size]
		if !ok {
			i = len(rows)
			bySize[size] = i
			rows = append(rows, LatencyRow{Placement: "unpinned", Size: size, By: map[string]LatencyResult{}})
		}
		ns := func(us float64) time.Duration { return time.Duration(math.Round(us * 1e3)) }
		res := LatencyResult{P50: ns(p50), P99: ns(p99), Mean: ns(mean)}
		if len(rec) > 8 { // p999_us, absent from older files
			p999, err := strconv.ParseFloat(rec[8], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("bench: latency.csv %v: %w", rec, err)
			}
			res.P999 = ns(p999)
		}
		rows[i].By[rec[0]] = res
	}
	return systems, rows, nil
}

// ReadThroughputCSV reads what WriteThroughputCSV wrote; each result is
// calls_per_s calls in one second.
func ReadThroughputCSV(r io.Reader) ([]string, []ThroughputRow, error) {
	recs, err := readCSV(r, "clients")
	if err != nil {
		return nil, nil, err
	}
	var (
		systems []string
		rows    []ThroughputRow
		byPoint = map[[2]int]int{}
	)
	for _, rec := range recs {
		size, err1 := strconv.Atoi(rec[1])
		clients, err2 := strconv.Atoi(rec[2])
		cps, err3 := strconv.ParseFloat(rec[3], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, nil, fmt.Errorf("bench: throughput.csv %v: %w", rec, err)
		}
		systems = appendNew(systems, rec[0])
		k := [2]int{size, clients}
		i, ok := byPoint[k]
		if !ok {
			i = len(rows)
			byPoint[k] = i
			rows = append(rows, ThroughputRow{Size: size, Callers: clients, By: map[string]ThroughputResult{}})
		}
		rows[i].By[rec[0]] = ThroughputResult{Callers: clients, Calls: int64(math.Round(cps)), Elapsed: time.Second}
	}
	return systems, rows, nil
}

func readCSV(r io.Reader, col string) ([][]string, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || len(recs[0]) < 6 || !slices.Contains(recs[0], col) {
		return nil, fmt.Errorf("bench: not an ATB CSV (no %s column)", col)
	}
	return recs[1:], nil
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// MergeLatency keeps, per point and system, the better (lower p50) of two
// runs: repetitions of a sweep taken at different times on a shared host.
func MergeLatency(a, b []LatencyRow) []LatencyRow {
	out := slices.Clone(a)
	for _, rb := range b {
		i := slices.IndexFunc(out, func(r LatencyRow) bool { return r.Size == rb.Size && r.Placement == rb.Placement })
		if i < 0 {
			out = append(out, rb)
			continue
		}
		by := maps.Clone(out[i].By)
		for s, v := range rb.By {
			if old, ok := by[s]; !ok || v.P50 < old.P50 {
				by[s] = v
			}
		}
		out[i].By = by
	}
	return out
}

// MergeThroughput keeps the higher calls/s per point and system.
func MergeThroughput(a, b []ThroughputRow) []ThroughputRow {
	out := slices.Clone(a)
	for _, rb := range b {
		i := slices.IndexFunc(out, func(r ThroughputRow) bool { return r.Size == rb.Size && r.Callers == rb.Callers })
		if i < 0 {
			out = append(out, rb)
			continue
		}
		by := maps.Clone(out[i].By)
		for s, v := range rb.By {
			if old, ok := by[s]; !ok || v.OpsPerSec() > old.OpsPerSec() {
				by[s] = v
			}
		}
		out[i].By = by
	}
	return out
}

// writeSlowRates follows the tail goal's line: how often the lanes, the
// best engine system and the host's floor were interrupted, per
// millisecond of calls over all repetitions. A percentile of a fixed call
// count penalizes a slower system (its calls last longer, so more of the
// host's interruptions land on them); a rate per millisecond compares
// them, and the floor's is the host's own.
func writeSlowRates(w io.Writer, r LatencyRow, lanes string) {
	if r.Slow == nil {
		return
	}
	best, _ := bestEngineP50(r)
	var parts []string
	for _, sys := range append([]string{lanes, best}, floorsOf(r)...) {
		t, ok := r.Slow[sys]
		if sys == "" || !ok {
			continue
		}
		rates := make([]string, len(SlowEdges))
		for i := range SlowEdges {
			rates[i] = strconv.FormatFloat(t.perMs(i), 'f', 2, 64)
		}
		parts = append(parts, fmt.Sprintf("%s %s (%d calls, %.1f ms)", sys, strings.Join(rates, " / "), t.Calls, float64(t.Elapsed)/float64(time.Millisecond)))
	}
	if len(parts) == 0 {
		return
	}
	fmt.Fprintf(w, "  - calls over %s µs per ms of calls, all repetitions: %s\n", slowEdgesText(), strings.Join(parts, "; "))
}

// floorsOf lists the floor systems of r: FloorName first, then the floors
// with work, shortest first (a floor as long as the lanes' call shows
// what the host does to a tail that long).
func floorsOf(r LatencyRow) []string {
	var out []string
	for s := range r.By {
		if IsFloor(s) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		fa, _ := parseFloor(a)
		fb, _ := parseFloor(b)
		return cmp.Compare(fa.Work, fb.Work)
	})
	return out
}

// withinText is ", ≤ 5× in k of n repetitions" for a system with more
// than one repetition tallied in r, else empty.
func withinText(r LatencyRow, sys string) string {
	t, ok := r.Slow[sys]
	if !ok || t.Reps < 2 {
		return ""
	}
	return fmt.Sprintf(", ≤ %.0f× in %d of %d repetitions", LanesTailGoal, t.Within, t.Reps)
}

// slowEdgesText is SlowEdges in µs, "5 / 10 / 20".
func slowEdgesText() string {
	edges := make([]string, len(SlowEdges))
	for i, e := range SlowEdges {
		edges[i] = strconv.Itoa(int(e / time.Microsecond))
	}
	return strings.Join(edges, " / ")
}

// overText is a repetition's Over for the runner's log: "5 / 10 / 20 µs:
// 3 / 1 / 0".
func overText(over [len(SlowEdges)]int64) string {
	n := make([]string, len(over))
	for i, v := range over {
		n[i] = strconv.FormatInt(v, 10)
	}
	return slowEdgesText() + " µs: " + strings.Join(n, " / ")
}

// ratioText is a goal's ratio to two decimals, or to as many more as it
// takes not to read as the goal itself: 0.899 against ≥ 0.9 shows as
// 0.899, not as a failing 0.90.
func ratioText(ratio, goal float64) string {
	for prec := 2; ; prec++ {
		t := strconv.FormatFloat(ratio, 'f', prec, 64)
		if r, _ := strconv.ParseFloat(t, 64); r != goal || ratio == goal || prec == 6 {
			return t
		}
	}
}
