package server

import (
	"sync"
	"time"
)

// laneMeter counts the calls of one dedicated lane for the server's
// metrics. A lane runs one call at a time on one goroutine, so its counts
// are plain fields updated under mu in two short sections a call (four
// atomic operations), where the prometheus children took about fourteen
// atomic read-modify-writes a call, on lines every lane of the function
// shares (measured ~60-90 ns of a 64 B lane call in place). The families'
// collectors (lanecollect.go) add every lane's counts to their own
// children at scrape time, so a scrape is as exact as before; a closing
// lane's counts move to the server's retired totals.
type laneMeter struct {
	mu      sync.Mutex
	tr      uint8
	eng     laneEngine // set before the meter is added, then only read
	last    *laneCells // the cells of the method last counted
	cells   []*laneCells
	in, out uint64 // frame bytes, for bytes_in_total / bytes_out_total
}

// laneEngine is what a dedicated lane's endpoint sent, for
// engine_messages_total: the engine counts its messages by the protocol
// they went by (hybrid resolved by size, fallbacks as rendezvous), which
// only the endpoint knows.
type laneEngine struct {
	m    *method                  // the lane's function
	sent func() [numEngine]uint64 // rdma.RPCEndpoint.SentByProtocol: never waits for an exchange
	// blocked: rdma.RPCEndpoint.WaitsBlocked (the lane carries a client
	// or bidirectional stream, stream_lane.go); parked and
	// parking: rdma.RPCEndpoint.ParkedWaits and Parking (its waits park
	// in Go then); tests read them.
	blocked func() bool
	parked  func() uint64
	parking func() bool
}

// laneCells are one method's counts on one lane (or, in laneMeters, the
// sum over lanes of one method and transport).
type laneCells struct {
	m                             *method
	calls, ok, reqBytes, repBytes uint64
	inflight                      int64
	lat                           []uint64 // per DurationBuckets bucket, then +Inf; not cumulative
	latSum                        time.Duration
	replies                       [numEngine]uint64
}

func newLaneCells(m *method) *laneCells {
	return &laneCells{m: m, lat: make([]uint64, len(DurationBuckets)+1)}
}

// cellsFor returns m's cells, under lm.mu.
func (lm *laneMeter) cellsFor(m *method) *laneCells {
	if c := lm.last; c != nil && c.m == m {
		return c
	}
	for _, c := range lm.cells {
		if c.m == m {
			lm.last = c
			return c
		}
	}
	c := newLaneCells(m)
	lm.cells = append(lm.cells, c)
	lm.last = c
	return c
}

// begin counts a call of m that arrived in a frameBytes frame with a
// reqBytes message: calls_total, request_bytes_total, in_flight,
// bytes_in_total.
func (lm *laneMeter) begin(m *method, reqBytes, frameBytes int) {
	lm.mu.Lock()
	c := lm.cellsFor(m)
	c.calls++
	c.inflight++
	c.reqBytes += uint64(reqBytes)
	lm.in += uint64(frameBytes)
	lm.mu.Unlock()
}

// end counts the end of a call begun by begin: it took took (from its
// arrival until its reply was handed to the engine),
// it ended ok or not (a failed call's outcome is counted by the caller
// on the families' own children: rare, and labelled by outcome), and
// its reply (repBytes of message in a frameBytes frame, sent by engine
// protocol pr; frameBytes 0: none).
func (lm *laneMeter) end(m *method, took time.Duration, ok bool, repBytes, frameBytes, pr int) {
	b := durationBucket(took)
	lm.mu.Lock()
	c := lm.cellsFor(m)
	c.inflight--
	c.lat[b]++
	c.latSum += took
	if ok {
		c.ok++
	}
	if frameBytes > 0 {
		c.repBytes += uint64(repBytes)
		c.replies[pr%numEngine]++
		lm.out += uint64(frameBytes)
	}
	lm.mu.Unlock()
}

// durationBucket is the index of the DurationBuckets bucket d falls in
// (len(DurationBuckets): +Inf), as a prometheus histogram fed d.Seconds()
// files it. It compares integers (durationEdges) rather than converting
// every lane call's duration to float seconds (an integer and a float
// division; paired runs could not resolve the gain).
func durationBucket(d time.Duration) int {
	for i, e := range durationEdges {
		if d <= e {
			return i
		}
	}
	return len(durationEdges)
}

// durationEdges[i] is the longest duration d with d.Seconds() <=
// DurationBuckets[i]: Seconds is monotonic, so d <= durationEdges[i]
// exactly when prometheus files d in bucket i or below.
var durationEdges = func() []time.Duration {
	out := make([]time.Duration, len(DurationBuckets))
	for i, ub := range DurationBuckets {
		d := time.Duration(ub * 1e9)
		for d.Seconds() > ub {
			d--
		}
		for (d + 1).Seconds() <= ub {
			d++
		}
		out[i] = d
	}
	return out
}()

// cellKey names a method on a lane transport.
type cellKey struct {
	m  *method
	tr uint8
}

// laneMeters are the server's lane meters: the live ones, and what the
// closed ones counted.
type laneMeters struct {
	mu        sync.Mutex
	live      map[*laneMeter]struct{}
	retired   map[cellKey]*laneCells
	retiredIO [numTransports][2]uint64 // bytes in, out by transport
	// retiredEng is what the closed lanes' endpoints sent, by function.
	retiredEng map[*method]*[numEngine]uint64
}

// add starts counting a new lane on transport tr, whose endpoint's sends
// eng reads.
func (ms *laneMeters) add(tr uint8, eng laneEngine) *laneMeter {
	lm := &laneMeter{tr: tr, eng: eng}
	ms.mu.Lock()
	if ms.live == nil {
		ms.live = map[*laneMeter]struct{}{}
		ms.retired = map[cellKey]*laneCells{}
		ms.retiredEng = map[*method]*[numEngine]uint64{}
	}
	ms.live[lm] = struct{}{}
	ms.mu.Unlock()
	return lm
}

// retire moves a closed lane's counts to the retired totals: they stay in
// the families, as a closed connection's calls stay in calls_total.
func (ms *laneMeters) retire(lm *laneMeter) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if _, ok := ms.live[lm]; !ok {
		return
	}
	delete(ms.live, lm)
	ms.fold(ms.retired, &ms.retiredIO, lm)
	addEngine(ms.retiredEng, lm.eng)
}

// addEngine adds what eng's endpoint sent so far into sums.
func addEngine(sums map[*method]*[numEngine]uint64, eng laneEngine) {
	if eng.sent == nil {
		return
	}
	s := sums[eng.m]
	if s == nil {
		s = new([numEngine]uint64)
		sums[eng.m] = s
	}
	for i, n := range eng.sent() {
		s[i] += n
	}
}

// fold adds lm's counts into sums and io, under lm.mu.
func (ms *laneMeters) fold(sums map[cellKey]*laneCells, io *[numTransports][2]uint64, lm *laneMeter) {
	io[lm.tr][0] += lm.in
	io[lm.tr][1] += lm.out
	for _, c := range lm.cells {
		addCells(sums, cellKey{c.m, lm.tr}, c)
	}
}

// addCells adds c into sums[k], made on first use.
func addCells(sums map[cellKey]*laneCells, k cellKey, c *laneCells) {
	s := sums[k]
	if s == nil {
		s = newLaneCells(c.m)
		sums[k] = s
	}
	s.calls += c.calls
	s.ok += c.ok
	s.reqBytes += c.reqBytes
	s.repBytes += c.repBytes
	s.inflight += c.inflight
	s.latSum += c.latSum
	for i, n := range c.lat {
		s.lat[i] += n
	}
	for i, n := range c.replies {
		s.replies[i] += n
	}
}

// laneSnap is what every lane counted so far, live and closed.
type laneSnap struct {
	cells  map[cellKey]*laneCells
	io     [numTransports][2]uint64
	engine map[*method]*[numEngine]uint64 // engine messages sent, by function
}

func (ms *laneMeters) snapshot() *laneSnap {
	snap := &laneSnap{cells: map[cellKey]*laneCells{}, engine: map[*method]*[numEngine]uint64{}}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	snap.io = ms.retiredIO
	for k, c := range ms.retired {
		addCells(snap.cells, k, c)
	}
	for m, e := range ms.retiredEng {
		cp := *e
		snap.engine[m] = &cp
	}
	for lm := range ms.live {
		lm.mu.Lock()
		ms.fold(snap.cells, &snap.io, lm)
		lm.mu.Unlock()
		addEngine(snap.engine, lm.eng) // outside lm.mu: the lane's goroutine takes it while in an exchange
	}
	return snap
}
