package hints

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// adaptsOf lists what changes at run time by design for a fast-path
// table, each with its trigger: nothing else moves a message off its row.
func adaptsOf(t *Table, share bool) []Adapt {
	var out []Adapt
	add := func(a Adaptation, trigger string, args ...any) {
		out = append(out, Adapt{What: a, Trigger: fmt.Sprintf(trigger, args...)})
	}
	switch t.Polling {
	case PollAdaptive:
		add(AdaptTunerSpin, "every 10ms (up to 80ms apart while it keeps deciding to spin) the tuner sets the spin before blocking: "+
			"100us while fewer lanes wait in C than there are cores, fewer goroutines queue for a processor than cores and the CPU (the lanes' own polling left out) is under 75%%; "+
			"10us while no more lanes wait than cores and the CPU is under 75%% (with more lanes than cores, only while fewer goroutines queue than cores), "+
			"or on one core with one lane while no other goroutine wants it; "+
			"otherwise none: the lane blocks")
	case PollBusy:
		add(AdaptTunerSpin, "the lane spins 20ms before blocking until the tuner decides to block: "+
			"more lanes waiting in C than cores, the CPU (the lanes' own polling left out) at 75%% or more (not on one core with one lane and no other goroutine wanting it), "+
			"or more lanes than cores with as many goroutines queued for a processor as cores")
	}
	if slices.ContainsFunc(t.Lane, func(r Row) bool { return r.Protocol == ProtoRFP }) {
		if t.Side == SideClient {
			add(AdaptRFPServerReply, "%d fetches (rfp_retries) find no response: the client asks for server-reply, and replies come eager up to %s, write_rndv above", t.RFPRetries, FormatSize(t.EagerThreshold))
		} else {
			add(AdaptRFPServerReply, "the client asked for server-reply: the reply goes eager up to %s, write_rndv above, instead of being fetched", FormatSize(t.EagerThreshold))
		}
	}
	if t.Overflow {
		add(AdaptFlockOverflow, "every dedicated lane (min(lanes, cores)) busy and the last request <= %s: the call goes by FLOCK", FormatSize(t.FlockMax))
	}
	if share {
		add(AdaptFlockToLane, "a request > %s, or no FLOCK handle to the server: the call takes a lane (lane rows)", FormatSize(t.FlockMax))
	}
	if t.Side == SideServer {
		add(AdaptFlockReply, "a request that came by FLOCK is answered by FLOCK")
	}
	add(AdaptRendezvous, "a message larger than the peer's buffer for it (eager: a slot of the peer's eager_threshold; direct and RFP: the peer's pre-known buffer) goes by write_rndv")
	add(AdaptBufferGrowth, "buffers grow to the largest message declared or seen at attach (direct %s, resp %s now; at most %s)", FormatSize(t.DirectSize), FormatSize(t.RespSize), FormatSize(BufferCap))
	if t.Batch == BatchAuto {
		add(AdaptBatchSize, "batch=auto: the batch size follows the measured latency against latency_limit %s", FormatDuration(t.LatencyLimit))
	}
	if t.Side == SideClient {
		add(AdaptTCPFallback, "lane setup fails (another user, budget, device error): calls go over TCP, the fast path is tried again with backoff")
	}
	return out
}

// FormatRange renders a row's range: "0-4KiB", "4097-..."
func (r Row) FormatRange() string {
	hi := "..."
	if r.Max != NoBound {
		hi = strconv.Itoa(r.Max)
	}
	return strconv.Itoa(r.Min) + "-" + hi
}

// String renders a row on one line: "0-4096 lane direct_write_imm busy".
func (r Row) String() string {
	s := r.FormatRange() + " " + r.Route.String() + " " + r.protocolText() + " " + r.Polling.String()
	if r.Inline {
		s += " inline"
	}
	return s
}

func (r Row) protocolText() string {
	if r.Route != RouteLane {
		return "-"
	}
	return r.Protocol.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// String renders the table for humans (hatgen explain, logs): a header
// line, the rows, the lane rows when a route other than the lane has
// some, and the run-time adaptations.
func (t Table) String() string {
	var b strings.Builder
	_ = t.Write(&b, "")
	return b.String()
}

// Write writes String's text with every line indented by indent.
func (t Table) Write(w io.Writer, indent string) error {
	tr := t.Transport.String()
	if t.Provider != "" {
		tr += " (" + t.Provider + ")"
	}
	fmt.Fprintf(w, "%sgoal=%s subscription=%s(%d/%d cores) transport=%s polling=%s\n",
		indent, t.Goal, t.Subscription, t.Concurrency, t.Cores, tr, t.Polling)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%sSIZE\tROUTE\tPROTOCOL\tPOLLING\tINLINE\n", indent)
	for _, r := range t.Rows {
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\n", indent, r.FormatRange(), r.Route, r.protocolText(), r.Polling, yesNo(r.Inline))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !t.FastPath() {
		writeStreamWindow(w, t, indent)
		return nil
	}
	if !slices.Equal(t.Rows, t.Lane) {
		if err := writeRows(w, indent, "lane rows (a call that leaves FLOCK for a lane):", t.Lane); err != nil {
			return err
		}
	}
	if t.StreamBatch != nil {
		if err := writeRows(w, indent, "stream batch rows (the stream's requests: this side's frames, batched):", t.StreamBatch); err != nil {
			return err
		}
	}
	inline := "off"
	if t.InlineThreshold > 0 {
		inline = FormatSize(t.InlineThreshold)
	}
	fmt.Fprintf(w, "%sinline<=%s eager_threshold=%s signal_interval=%d rfp_retries=%d rfp_fetch_size=%s credits=%d direct=%s resp=%s\n",
		indent, inline, FormatSize(t.EagerThreshold), t.SignalInterval, t.RFPRetries, FormatSize(t.RFPFetchSize),
		t.Credits, FormatSize(t.DirectSize), FormatSize(t.RespSize))
	share := "off"
	if t.QPSharing {
		share = "on"
	}
	fmt.Fprintf(w, "%sqp_sharing=%s batch=%s", indent, share, t.Batch)
	if t.Batch != BatchOff {
		fmt.Fprintf(w, " batch_bytes=%s batch_timeout=%s", FormatSize(t.BatchBytes), FormatDuration(t.BatchTimeout))
	}
	timeout := "none"
	if t.Timeout > 0 {
		timeout = FormatDuration(t.Timeout)
	}
	fmt.Fprintf(w, " numa=%s timeout=%s\n", t.NUMA, timeout)
	writeStreamWindow(w, t, indent)
	for _, a := range t.Adapts {
		fmt.Fprintf(w, "%sadapts %s: %s\n", indent, a.What, a.Trigger)
	}
	return nil
}

// writeRows prints a titled block of extra rows, indented under the
// table's own.
func writeRows(w io.Writer, indent, title string, rows []Row) error {
	fmt.Fprintf(w, "%s%s\n", indent, title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s  %s\t%s\t%s\t%s\t%s\n", indent, r.FormatRange(), r.Route, r.protocolText(), r.Polling, yesNo(r.Inline))
	}
	return tw.Flush()
}

// writeStreamWindow prints a stream's hinted receive window (TCP and
// lane tables alike).
func writeStreamWindow(w io.Writer, t Table, indent string) {
	if t.StreamWindow > 0 {
		fmt.Fprintf(w, "%sstream_window=%s (%d messages) per stream\n", indent, FormatSize(t.StreamWindow), t.StreamWindowMessages)
	}
}
