package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A tail trace lines up a run's slow calls (atb -stamps) with what a
// trace of the whole host (`perf record -a -k mono`, read back with
// `perf script`) saw on its CPUs while each of them waited: another
// thread taking a poller's CPU, a poller sleeping, an interrupt, a fault,
// or nothing at all, which on a VM is time the hypervisor took.
// scripts/tail-trace.sh takes both and prints TraceReport.

// StampWindow is one latency repetition's stamps as ReadStamps reads
// them back: the system, size and repetition, the recorded calls' span
// and the slow calls in it.
type StampWindow struct {
	System    string
	Size, Rep int
	Stamps
}

// ReadStamps reads what writeStamps wrote.
func ReadStamps(r io.Reader) ([]StampWindow, error) {
	var out []StampWindow
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		bad := func(why string) error { return fmt.Errorf("stamps line %d: %s: %q", n, why, sc.Text()) }
		switch f[0] {
		case "W":
			v, err := ints(f, 7)
			if err != nil {
				return nil, bad(err.Error())
			}
			out = append(out, StampWindow{System: f[1], Size: int(v[0]), Rep: int(v[1]),
				Stamps: Stamps{Begin: v[2], End: v[3], Dropped: int(v[4])}})
		case "S":
			v, err := ints(f, 6)
			if err != nil {
				return nil, bad(err.Error())
			}
			if len(out) == 0 {
				return nil, bad("a slow call before any window")
			}
			w := &out[len(out)-1]
			if f[1] != w.System || int(v[0]) != w.Size || int(v[1]) != w.Rep {
				return nil, bad("not of the window before it")
			}
			w.Calls = append(w.Calls, StampedCall{Start: v[2], Len: time.Duration(v[3])})
		default:
			return nil, bad("neither W nor S")
		}
	}
	return out, sc.Err()
}

// ints parses the fields after the first two of a line of want fields.
func ints(f []string, want int) ([]int64, error) {
	if len(f) != want {
		return nil, fmt.Errorf("%d fields, want %d", len(f), want)
	}
	v := make([]int64, 0, want-2)
	for _, s := range f[2:] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, err
		}
		v = append(v, n)
	}
	return v, nil
}

// traceEvent is one event of `perf script --ns -F
// comm,pid,tid,cpu,time,event,trace,ip,sym` output, with its call chain
// when it has one (outermost frame last).
type traceEvent struct {
	t      int64 // ns
	cpu    int
	comm   string
	tid    int
	name   string // "sched:sched_switch", ...
	args   string
	frames []frame
	sw     *switchOf // a sched_switch event's tasks, parsed once as it is read
}

type frame struct {
	kernel bool
	sym    string
}

var (
	eventLine  = regexp.MustCompile(`^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d{9}):\s+(\S+):\s*(.*)$`)
	frameLine  = regexp.MustCompile(`^\s+([0-9a-f]+)\s+(.*)$`)
	switchArgs = regexp.MustCompile(`prev_comm=(.*) prev_pid=(\d+) prev_prio=\S+ prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)`)
)

// readPerfScript reads perf script's lines (see traceEvent), sorted by time.
func readPerfScript(r io.Reader) ([]traceEvent, error) {
	var out []traceEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := eventLine.FindStringSubmatch(l); m != nil {
			tid, _ := strconv.Atoi(m[3])
			cpu, _ := strconv.Atoi(m[4])
			s, _ := strconv.ParseInt(m[5], 10, 64)
			ns, _ := strconv.ParseInt(m[6], 10, 64)
			e := traceEvent{t: s*1e9 + ns, cpu: cpu, comm: m[1], tid: tid, name: m[7], args: m[8]}
			if e.name == "sched:sched_switch" {
				e.sw = parseSwitch(e.args)
			}
			out = append(out, e)
			continue
		}
		if m := frameLine.FindStringSubmatch(l); m != nil && len(out) > 0 {
			e := &out[len(out)-1]
			e.frames = append(e.frames, frame{kernel: strings.HasPrefix(m[1], "ffff"), sym: strings.TrimSpace(m[2])})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b traceEvent) int { return cmp.Compare(a.t, b.t) })
	return out, nil
}

// switchOf is a sched_switch event's tasks.
type switchOf struct {
	prev, next int
	prevState  string
	nextComm   string
}

// parseSwitch reads a sched_switch event's arguments (nil: not in the
// form this reads, and the event is then not counted as a switch).
func parseSwitch(args string) *switchOf {
	m := switchArgs.FindStringSubmatch(args)
	if m == nil {
		return nil
	}
	prev, _ := strconv.Atoi(m[2])
	next, _ := strconv.Atoi(m[5])
	return &switchOf{prev: prev, next: next, prevState: m[3], nextComm: m[4]}
}

// genericFrames say nothing of why a thread slept.
var genericFrames = []string{"__schedule", "schedule", "entry_SYSCALL", "do_syscall_64", "[unknown]", "__x64_sys_"}

// sleptIn names what a thread was doing when it switched out: its first
// two user-space frames, else its first two telling kernel frames.
func sleptIn(fr []frame) string {
	pick := func(kernel bool) []string {
		var out []string
		for _, f := range fr {
			if f.kernel != kernel || slices.ContainsFunc(genericFrames, func(g string) bool { return strings.HasPrefix(f.sym, g) }) {
				continue
			}
			if out = append(out, f.sym); len(out) == 2 {
				break
			}
		}
		return out
	}
	if u := pick(false); len(u) > 0 {
		return strings.Join(u, " < ")
	}
	return strings.Join(pick(true), " < ")
}

// tracedHost indexes a trace for the questions TraceReport asks.
type tracedHost struct {
	ev       []traceEvent
	switches map[int][]int // per CPU, indexes into ev of its sched_switch events
}

func indexTrace(ev []traceEvent) *tracedHost {
	h := &tracedHost{ev: ev, switches: map[int][]int{}}
	for i := range ev {
		if ev[i].sw != nil {
			h.switches[ev[i].cpu] = append(h.switches[ev[i].cpu], i)
		}
	}
	return h
}

// current is the task on cpu at t (-1: not known).
func (h *tracedHost) current(cpu int, t int64) int {
	sw := h.switches[cpu]
	k := sort.Search(len(sw), func(j int) bool { return h.ev[sw[j]].t > t })
	if k == 0 {
		return -1
	}
	return h.ev[sw[k-1]].sw.next
}

// leaves is what task, switched in by event i on its CPU, was doing when
// it next switched out there.
func (h *tracedHost) leaves(i int, task int) string {
	e := &h.ev[i]
	sw := h.switches[e.cpu]
	k := sort.SearchInts(sw, i)
	for ; k < len(sw); k++ {
		o := &h.ev[sw[k]]
		if o.sw.prev == task && sw[k] > i {
			if w := sleptIn(o.frames); w != "" {
				return w
			}
			break
		}
	}
	return ""
}

// inside says what the host did while a call over [from, to] waited.
func (h *tracedHost) inside(from, to int64) string {
	lo := sort.Search(len(h.ev), func(j int) bool { return h.ev[j].t >= from })
	hi := sort.Search(len(h.ev), func(j int) bool { return h.ev[j].t > to })
	// The tasks on each CPU when the call began: the pollers, or
	// whatever held a CPU then.
	was := map[int]bool{}
	for cpu := range h.switches {
		was[h.current(cpu, from)] = true
	}
	var slept, ran, moved string
	var softirqs []string
	var fault, ipi, timer bool
	for i := lo; i < hi; i++ {
		e := &h.ev[i]
		switch {
		case e.sw != nil:
			s := e.sw
			switch {
			case was[s.prev] && s.prevState != "R" && s.prevState != "R+" && slept == "":
				slept = "a thread running at the call's start slept: " + withWhere(e.comm, sleptIn(e.frames))
			case !was[s.next] && s.next != 0 && ran == "":
				ran = "another thread ran: " + withWhere(s.nextComm, h.leaves(i, s.next))
			default:
				moved = "threads switched, none new"
			}
		case strings.HasPrefix(e.name, "exceptions:page_fault"):
			fault = true
		case e.name == "irq:softirq_entry":
			// "vec=7 [action=SCHED]", then perf's ip and symbol
			if _, a, ok := strings.Cut(e.args, "action="); ok {
				if a, _, _ = strings.Cut(a, "]"); !slices.Contains(softirqs, a) {
					softirqs = append(softirqs, a)
				}
			}
		case strings.HasPrefix(e.name, "irq_vectors:call_function") || strings.HasPrefix(e.name, "irq_vectors:reschedule"):
			ipi = true
		case e.name == "irq_vectors:local_timer_entry":
			timer = true
		}
	}
	switch {
	case slept != "":
		return slept
	case ran != "":
		return ran
	case moved != "":
		return moved
	case fault:
		return "a page fault"
	case len(softirqs) > 0:
		slices.Sort(softirqs)
		return "a softirq (" + strings.Join(softirqs, ", ") + ")"
	case ipi:
		return "an IPI"
	case timer:
		return "a timer interrupt only"
	}
	return "nothing the guest saw"
}

func withWhere(comm, where string) string {
	if where == "" {
		return comm
	}
	return comm + " (" + where + ")"
}

// tailBand is the column of TraceReport a slow call of length d falls
// in: the last of SlowEdges it reaches (the first for any shorter call).
func tailBand(d time.Duration) int {
	for i := len(SlowEdges) - 1; i > 0; i-- {
		if d >= SlowEdges[i] {
			return i
		}
	}
	return 0
}

// TraceReport reads a run's stamps and the host's trace (perf script
// output, see traceEvent) and writes, per system and size, its slow calls
// by what the host did inside them, in three bands of length, with the
// rate of each per millisecond of recorded calls.
func TraceReport(w io.Writer, stamps io.Reader, perfScript io.Reader) error {
	wins, err := ReadStamps(stamps)
	if err != nil {
		return err
	}
	ev, err := readPerfScript(perfScript)
	if err != nil {
		return err
	}
	if len(ev) == 0 {
		return fmt.Errorf("tail trace: no events in the perf script output (want perf script --ns -F comm,pid,tid,cpu,time,event,trace,ip,sym)")
	}
	h := indexTrace(ev)
	type key struct {
		system string
		size   int
	}
	type tally struct {
		reps, dropped, slow int
		span                time.Duration
		by                  map[string]*[len(SlowEdges)]int
	}
	var order []key
	all := map[key]*tally{}
	for _, win := range wins {
		k := key{win.System, win.Size}
		t := all[k]
		if t == nil {
			t = &tally{by: map[string]*[len(SlowEdges)]int{}}
			all[k] = t
			order = append(order, k)
		}
		t.reps++
		t.dropped += win.Dropped
		t.span += time.Duration(win.End - win.Begin)
		for _, c := range win.Calls {
			what := h.inside(c.Start, c.Start+int64(c.Len))
			if t.by[what] == nil {
				t.by[what] = new([len(SlowEdges)]int)
			}
			t.by[what][tailBand(c.Len)]++
			t.slow++
		}
	}
	for _, k := range order {
		t := all[k]
		ms := float64(t.span) / float64(time.Millisecond)
		fmt.Fprintf(w, "\n%s %s: %d repetitions, %.1f ms of calls, %d calls over %v (%.2f a ms)", k.system, SizeLabel(k.size), t.reps, ms, t.slow, SlowEdges[0], float64(t.slow)/ms)
		if t.dropped > 0 {
			fmt.Fprintf(w, ", %d more not stamped", t.dropped)
		}
		fmt.Fprint(w, "\n\n| inside the slow call |")
		for i, e := range SlowEdges {
			if i+1 < len(SlowEdges) {
				fmt.Fprintf(w, " %v–%v |", e, SlowEdges[i+1])
			} else {
				fmt.Fprintf(w, " ≥ %v |", e)
			}
		}
		fmt.Fprintf(w, " a ms |\n|---|%s---:|\n", strings.Repeat("---:|", len(SlowEdges)))
		whats := make([]string, 0, len(t.by))
		for what := range t.by {
			whats = append(whats, what)
		}
		sum := func(what string) int {
			n := 0
			for _, v := range t.by[what] {
				n += v
			}
			return n
		}
		slices.SortFunc(whats, func(a, b string) int {
			if c := cmp.Compare(sum(b), sum(a)); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		for _, what := range whats {
			fmt.Fprintf(w, "| %s |", what)
			for _, n := range t.by[what] {
				fmt.Fprintf(w, " %d |", n)
			}
			fmt.Fprintf(w, " %.2f |\n", float64(sum(what))/ms)
		}
	}
	return nil
}
