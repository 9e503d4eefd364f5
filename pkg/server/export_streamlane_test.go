//go:build cgo && linux

package server

import "time"

// StreamLaneCaller runs requests through a lane session's call path as
// the engine would hand them over (no endpoint): a lane carrying streams
// for hand-made frames. Each reply is copied (the lane reuses its buffer).
func StreamLaneCaller(s *Server) (call func(req []byte) []byte, close func()) {
	ls, close := testLane(s, false)
	return func(req []byte) []byte {
		out, _ := ls.call(req)
		return append([]byte(nil), out...)
	}, close
}

// LentStreamReplies counts s's stream lane replies written straight into
// the reply's memory (Outbox.Lend).
func LentStreamReplies(s *Server) uint64 { return s.lentReplies.Load() }

// LentStreamPolls counts s's held stream lane polls that found the reply's
// memory lent to the outbox.
func LentStreamPolls(s *Server) uint64 { return s.lentPolls.Load() }

// TurnExchanges counts s's stream lane exchanges run by a handler at its
// wait for credit (stream_laneturn.go).
func TurnExchanges(s *Server) uint64 { return s.turnExchanges.Load() }

// TurnWaits counts s's handlers waiting in their turn for the client's
// next request now.
func TurnWaits(s *Server) int64 { return s.turnWaits.Load() }

// SetTurnHold sets how long an offered turn waits for the handler (a
// test that must find the handler in its turn sets it past its run);
// restore puts the default back. Not safe while streams run.
func SetTurnHold(d time.Duration) (restore func()) {
	old := turnHold
	turnHold = d
	return func() { turnHold = old }
}

// NextStreamLeases counts s's stream lane replies whose exchange lent the
// outbox the engine's other staging buffer for the next reply.
func NextStreamLeases(s *Server) uint64 { return s.nextLeases.Load() }

// BlockedLaneWaits counts s's lanes whose waits park (the lanes of client
// and bidirectional streams, stream_lane.go).
func BlockedLaneWaits(s *Server) int {
	ms := &s.laneMeters
	ms.mu.Lock()
	defer ms.mu.Unlock()
	n := 0
	for lm := range ms.live {
		if lm.eng.blocked != nil && lm.eng.blocked() {
			n++
		}
	}
	return n
}

// ParkedLaneWaits sums the waits the live lanes parked in Go so far
// (rdma.RPCEndpoint.ParkedWaits), and counts the lanes holding a parker
// now (Parking).
func ParkedLaneWaits(s *Server) (waits uint64, parking int) {
	ms := &s.laneMeters
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for lm := range ms.live {
		if lm.eng.parked != nil {
			waits += lm.eng.parked()
		}
		if lm.eng.parking != nil && lm.eng.parking() {
			parking++
		}
	}
	return waits, parking
}
