package flock

import "time"

// The dispatchers' spin (server.go, conn.go): after the rings go empty
// they keep polling for a while, yielding between polls, before they
// sleep.

// spinWindow is the longest a dispatcher keeps yielding after its rings
// went empty before it sleeps on the doorbell (µs-scale timer naps are no
// alternative: Go rounds them up to about a millisecond).
const spinWindow = 200 * time.Microsecond

// politeAfter is the number of empty rounds after which a spinning
// dispatcher also yields its core to other threads (osyield.Thread): the
// first rounds catch an answer that is a turnaround away. Measured on 2
// vCPUs, hatkv YCSB B at 64 threads over shm, 8 alternating rounds: user
// CPU per operation 14.5 -> 12.0 µs (means), sys 3.9 -> 5.5, the total
// lower in 7 of 8 rounds (docs/performance/history.md, "FLOCK").
const politeAfter = 16

// minSpin is the shortest spin a dispatcher adapts down to.
const minSpin = 10 * time.Microsecond

// spinner is a dispatcher's adaptive spin: how long it keeps yielding after
// its rings went empty before it sleeps. A spin that keeps ending in a
// sleep (a saturated peer whose messages come in bursts milliseconds
// apart, handlers waiting for disk, callers thinking) only takes a core
// the peer needs, so the window halves each time that happens and doubles
// back when the spin pays, between minSpin and spinWindow.
type spinner struct {
	window time.Duration
	gaveUp bool // this idle spell's spin ended without a message
}

func newSpinner() spinner { return spinner{window: spinWindow} }

// found records that the rings held something after idle empty rounds.
func (s *spinner) found(idle int) {
	if idle > 0 && !s.gaveUp {
		s.window = min(2*s.window, spinWindow) // the spin paid
	}
	s.gaveUp = false
}

// spinning reports whether to keep yielding, idle rounds into an idle
// spell that began at quiet.
func (s *spinner) spinning(idle int, quiet time.Time) bool {
	return !s.gaveUp && (idle < 16 || time.Since(quiet) < s.window)
}

// giveUp records that this spell's spin did not pay.
func (s *spinner) giveUp() {
	if !s.gaveUp {
		s.window, s.gaveUp = max(s.window/2, minSpin), true
	}
}
