package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// StreamDriver runs the stream systems (stream.go), server and client in
// processes of their own as Driver does: per size, one stream of
// Count(size) messages per system, Reps times with the systems taking
// turns, the fastest run kept.
type StreamDriver struct {
	Systems []string
	Sizes   []int
	// Bytes is each point's payload; MaxMsgs caps its messages (0: no
	// cap), so a 64 B point need not send 16 M of them.
	Bytes   int64
	MaxMsgs int64
	// UnaryDur ends hatrpc-unary's run early: a call per message is far
	// slower than a stream.
	UnaryDur time.Duration
	Reps     int
	Log      io.Writer
}

// StreamRow is one size's results by system.
type StreamRow struct {
	Size  int
	Count int64
	By    map[string]StreamResult
}

// ErrBadStreamRun refuses flags that cannot give a table.
var ErrBadStreamRun = errors.New("bench: bad stream run")

// Count is the messages of a point of size bytes.
func (d *StreamDriver) Count(size int) int64 {
	n := max(d.Bytes/int64(max(size, 1)), 1)
	if d.MaxMsgs > 0 {
		n = min(n, d.MaxMsgs)
	}
	return n
}

// Validate checks the run can give a table before anything starts.
func (d *StreamDriver) Validate() error {
	var bad []string
	if len(d.Systems) == 0 {
		bad = append(bad, "no systems")
	}
	for _, s := range d.Systems {
		if _, err := Lookup(s); err != nil {
			return err
		}
		if !IsStream(s) {
			bad = append(bad, s+" is not a stream system (have "+strings.Join(StreamSystems(), ", ")+")")
		}
	}
	if len(d.Sizes) == 0 {
		bad = append(bad, "no sizes")
	}
	for _, n := range d.Sizes {
		if n <= 0 || n > maxMessage {
			bad = append(bad, fmt.Sprintf("size %d not in 1..%d", n, maxMessage))
		}
	}
	if d.Bytes <= 0 {
		bad = append(bad, fmt.Sprintf("bytes %d <= 0", d.Bytes))
	}
	if d.MaxMsgs < 0 {
		bad = append(bad, fmt.Sprintf("max messages %d < 0", d.MaxMsgs))
	}
	if d.Reps < 1 {
		bad = append(bad, fmt.Sprintf("reps %d < 1", d.Reps))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrBadStreamRun, strings.Join(bad, "; "))
	}
	return nil
}

// StreamSystems lists the registered stream systems, sorted.
func StreamSystems() []string {
	var out []string
	for _, s := range Systems() {
		if IsStream(s) {
			out = append(out, s)
		}
	}
	return out
}

// Run measures every point.
func (d *StreamDriver) Run(ctx context.Context) ([]StreamRow, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	addrs := map[string]string{}
	var started []*RemoteServer
	defer func() {
		for _, s := range started {
			_ = s.Stop()
		}
	}()
	for _, sys := range d.Systems {
		if s, _ := Lookup(sys); isServerless(s) {
			addrs[sys] = "-"
			continue
		}
		srv, err := StartServerProcess(ctx, sys, "")
		if err != nil {
			return nil, err
		}
		started = append(started, srv)
		addrs[sys] = srv.Addr
	}
	rows := make([]StreamRow, len(d.Sizes))
	for i, size := range d.Sizes {
		rows[i] = StreamRow{Size: size, Count: d.Count(size), By: map[string]StreamResult{}}
	}
	for rep := 0; rep < d.Reps; rep++ {
		for i := range rows {
			row := &rows[i]
			for k := range d.Systems {
				sys := d.Systems[(k+rep+i)%len(d.Systems)]
				spec := &StreamSpec{Size: row.Size, Count: row.Count, Warmup: min(row.Count, 1000)}
				if sys == (HatStream{Unary: true}).Name() {
					spec.MaxDur = d.UnaryDur
				}
				res, err := RunClientProcess(ctx, ClientSpec{System: sys, Addr: addrs[sys], Stream: spec}, "")
				if err != nil {
					return nil, err
				}
				if res.Stream == nil {
					return nil, fmt.Errorf("%w: %s answered no stream result", ErrChild, sys)
				}
				r := *res.Stream
				if old, ok := row.By[sys]; !ok || r.MBPerSec() > old.MBPerSec() {
					row.By[sys] = r
				}
				if d.Log != nil {
					fmt.Fprintf(d.Log, "stream %-20s %7s rep %d %d msgs in %v: %.1f MB/s %.0f msgs/s\n",
						sys, SizeLabel(row.Size), rep, r.Messages, r.Elapsed.Round(time.Microsecond), r.MBPerSec(), r.MsgsPerSec())
				}
			}
		}
	}
	for _, s := range started {
		if err := s.Stop(); err != nil {
			return nil, err
		}
	}
	started = nil
	return rows, nil
}

func isServerless(s System) bool {
	_, ok := s.(serverless)
	return ok
}

// StreamGoal is one of issue 46's ratios at one size.
type StreamGoal struct {
	Goal     string
	Size     int
	Num, Den string  // systems compared
	Ratio    float64 // Num / Den in MB/s (= in messages/s: same size)
	Want     float64
	Note     string
}

// OK reports whether the goal is met.
func (g StreamGoal) OK() bool { return g.Ratio >= g.Want }

// Goals names of StreamGoals.
const (
	GoalBulkTCP = "bulk over TCP vs raw TCP floor"
	GoalBulkShm = "bulk with shm lanes vs 1-core memmove"
	GoalGRPC    = "vs gRPC-Go server streaming"
	GoalSmall   = "64 B stream msgs/s vs unary calls/s, 1 caller"
)

// bulkSize is the message size of the bulk goals, smallSize the small
// messages' (issue 46).
const (
	bulkSize  = 64 << 10
	smallSize = 64
)

// StreamGoals computes the goals the rows hold both sides of.
func StreamGoals(rows []StreamRow) []StreamGoal {
	var out []StreamGoal
	ratio := func(goal string, r StreamRow, num, den string, want float64, note string) {
		a, okA := r.By[num]
		b, okB := r.By[den]
		if !okA || !okB || b.MBPerSec() <= 0 {
			return
		}
		// Per-message rates: unary runs a different number of messages.
		out = append(out, StreamGoal{Goal: goal, Size: r.Size, Num: num, Den: den, Ratio: a.MsgsPerSec() / b.MsgsPerSec(), Want: want, Note: note})
	}
	for _, r := range rows {
		if r.Size == bulkSize {
			ratio(GoalBulkTCP, r, "hatrpc-stream", "raw-tcp-stream", 0.8, "")
			ratio(GoalBulkShm, r, "hatrpc-stream-lanes", "memmove", 0.8, "")
		}
		ratio(GoalGRPC, r, "hatrpc-stream", "grpc-stream", 1, "")
		if r.Size == smallSize {
			ratio(GoalSmall, r, "hatrpc-stream", "hatrpc-unary", 5, "")
		}
	}
	return out
}

// WriteStreamReport prints the MB/s and messages/s tables and the goals.
func WriteStreamReport(w io.Writer, systems []string, rows []StreamRow, bytes int64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	table := func(title string, cell func(StreamResult) string) {
		fmt.Fprintln(tw, title)
		fmt.Fprint(tw, "size\tmessages\t")
		for _, s := range systems {
			fmt.Fprintf(tw, "%s\t", s)
		}
		fmt.Fprintln(tw)
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t", SizeLabel(r.Size), r.Count)
			for _, s := range systems {
				c := "-"
				if v, ok := r.By[s]; ok {
					c = cell(v)
				}
				fmt.Fprintf(tw, "%s\t", c)
			}
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw)
	}
	table("payload MB/s (10^6 B/s), best run; hatrpc-unary: one call per message, 1 caller, for at most -unary-dur",
		func(v StreamResult) string { return fmt.Sprintf("%.1f", v.MBPerSec()) })
	table("messages/s (calls/s for hatrpc-unary)",
		func(v StreamResult) string { return fmt.Sprintf("%.0f", v.MsgsPerSec()) })
	if err := tw.Flush(); err != nil {
		return err
	}
	goals := StreamGoals(rows)
	fmt.Fprintf(w, "goals (issue 46; bulk goals state 1 GiB, this run moved %s per point)\n", SizeLabel(int(bytes)))
	if len(goals) == 0 {
		fmt.Fprintln(w, "  none measured: they need hatrpc-stream with raw-tcp-stream, hatrpc-stream-lanes with memmove (64KiB), grpc-stream, or hatrpc-unary (64B)")
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  goal\tsize\tratio\twant\tverdict\tnote")
	for _, g := range goals {
		v := "ok"
		if !g.OK() {
			v = "MISS"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.2fx %s/%s\t>= %.1fx\t%s\t%s\n", g.Goal, SizeLabel(g.Size), g.Ratio, g.Num, g.Den, g.Want, v, g.Note)
	}
	return tw.Flush()
}
