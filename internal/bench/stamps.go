package bench

import (
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// Stamps place a latency repetition's slow calls (over SlowEdges[0]) in
// time, on CLOCK_MONOTONIC, the clock `perf record -k mono` stamps its
// events with: a trace of the host taken during the run then says what
// ran on the CPUs while each slow call waited (scripts/tail-trace.sh,
// TraceReport). Begin and End bound the recorded calls.
type Stamps struct {
	Begin int64         `json:"begin_ns"`
	End   int64         `json:"end_ns"`
	Calls []StampedCall `json:"calls,omitempty"`
	// Dropped counts slow calls past maxStamps, which were not stamped.
	Dropped int `json:"dropped,omitempty"`
}

// StampedCall is one slow call: its start (CLOCK_MONOTONIC, ns) and length.
type StampedCall struct {
	Start int64         `json:"start_ns"`
	Len   time.Duration `json:"len_ns"`
}

// maxStamps bounds a repetition's stamps (24 bytes each): a host in a
// bad phase can make every call slow.
const maxStamps = 1 << 16

// stamper collects a repetition's slow calls. Calls are timed with the
// runtime's monotonic clock (a vDSO read); a CLOCK_MONOTONIC system call
// made once, right before the first call's time, maps them onto the
// trace's clock (the two are the same clock on Linux; the mapping is off
// by the time between the two reads, under a microsecond).
type stamper struct {
	mono  int64     // CLOCK_MONOTONIC at base
	base  time.Time // the runtime's reading right after it
	calls []StampedCall
	drop  int
}

func newStamper() *stamper {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return &stamper{mono: ts.Nano(), base: time.Now(), calls: make([]StampedCall, 0, 1024)}
}

// add stamps a slow call that started at start and took d.
func (s *stamper) add(start time.Time, d time.Duration) {
	if len(s.calls) == maxStamps {
		s.drop++
		return
	}
	s.calls = append(s.calls, StampedCall{Start: s.at(start), Len: d})
}

func (s *stamper) at(t time.Time) int64 { return s.mono + int64(t.Sub(s.base)) }

// done closes the repetition: its calls began at began and lasted elapsed.
func (s *stamper) done(began time.Time, elapsed time.Duration) *Stamps {
	b := s.at(began)
	return &Stamps{Begin: b, End: b + int64(elapsed), Calls: s.calls, Dropped: s.drop}
}

// writeStamps writes a repetition's stamps as lines a trace report reads
// (ReadStamps): "W system size rep begin end dropped", then "S system
// size rep start length" a slow call, times in ns.
func writeStamps(w io.Writer, system string, size, rep int, st *Stamps) error {
	if _, err := fmt.Fprintf(w, "W %s %d %d %d %d %d\n", system, size, rep, st.Begin, st.End, st.Dropped); err != nil {
		return err
	}
	for _, c := range st.Calls {
		if _, err := fmt.Fprintf(w, "S %s %d %d %d %d\n", system, size, rep, c.Start, int64(c.Len)); err != nil {
			return err
		}
	}
	return nil
}
