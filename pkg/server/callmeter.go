package server

import (
	"runtime"
	"sync/atomic"
	"time"
)

// The per-call metrics of calls that execute ends (TCP, Thrift, HTTP, the
// FLOCK session and lanes without a meter) are kept in shards rather than
// in the families' children: every connection of a method updated the
// same children (about eleven atomic read-modify-writes a call, the float
// ones CAS loops), and at 64 callers over four connections those cache
// lines moved between cores on every call (a probe without them: server
// CPU 1.65 against 1.90 µs a 512 B call). A connection takes shard
// connSeq mod n, so connections up to n never share a line, and the
// families' collectors add the shards to their children at scrape time
// (lanecollect.go), as they add the dedicated lanes' meters: a scrape
// reads the same values as before once calls are done. Shards belong to
// the method, not the connection, so nothing is folded when one closes.

// callCell is one shard of a method's counts on one transport. in_flight
// is not kept: it is calls less the calls the histogram counted (ended),
// two atomic updates a call fewer.
type callCell struct {
	calls, reqBytes, repBytes, ok atomic.Uint64
	latSum                        atomic.Int64 // nanoseconds
	lat                           [numDurationBuckets + 1]atomic.Uint64
	// pad to 256 bytes: a cell's lines (and the adjacent-line
	// prefetcher's pairs) are its own.
	_ [256 - (5+numDurationBuckets+1)*8]byte
}

// ioCell is one shard of bytes_in_total and bytes_out_total of the
// transports a connection reads itself (tcp, thrift).
type ioCell struct {
	in, out [2]atomic.Uint64 // by ioTCP, ioThrift
	_       [128 - 4*8]byte
}

const (
	ioTCP = iota
	ioThrift
)

// ioOf is the ioCell index of transport label tr (trTCP or trThrift).
func ioOf(tr uint8) int {
	if tr == trThrift {
		return ioThrift
	}
	return ioTCP
}

// callShardCount is how many shards a method's counts and the io counts
// have: twice the Ps, a power of two, 8 to 64 (a method's shards cost
// 256 bytes each on a transport it served).
func callShardCount() int {
	n := 8
	for n < 2*runtime.GOMAXPROCS(0) && n < 64 {
		n *= 2
	}
	return n
}

// cell returns st's shard for a connection of shard number shard, making
// the shards on the method's first call on the transport.
func (st *methodStats) cell(shard uint32) *callCell {
	p := st.cells.Load()
	if p == nil {
		cs := make([]callCell, st.n)
		st.cells.CompareAndSwap(nil, &cs)
		p = st.cells.Load()
	}
	cs := *p
	return &cs[shard&uint32(len(cs)-1)]
}

// begin counts a call's start: calls_total, request_bytes_total and, until
// end, in_flight.
func (cc *callCell) begin(reqBytes int) {
	cc.calls.Add(1)
	cc.reqBytes.Add(uint64(reqBytes))
}

// end counts a call begun on cc that took took and ended by outcome o (a
// failed call's outcome goes to the families' own children: rare, and
// labelled).
func (cc *callCell) end(st *methodStats, took time.Duration, o string, ok bool) {
	cc.lat[durationBucket(took)].Add(1)
	cc.latSum.Add(int64(took))
	if ok {
		cc.ok.Add(1)
		return
	}
	st.outcome(o)
}

// io returns the io shard of a connection of shard number shard.
func (m *metrics) io(shard uint32) *ioCell {
	return &m.ioc[shard&uint32(len(m.ioc)-1)]
}

// track makes st's shards part of the scrape; st.key names its method and
// transport.
func (m *metrics) track(st *methodStats) {
	m.trackMu.Lock()
	m.tracked = append(m.tracked, st)
	m.trackMu.Unlock()
}

// addCalls adds every tracked method's shards and the io shards to snap.
// Each shard's ended calls (the histogram) are read before its calls, so a
// scrape during calls never shows in_flight below zero; it may count as
// in flight a call that began and ended while the shard was being read.
func (m *metrics) addCalls(snap *laneSnap) {
	m.trackMu.Lock()
	tracked := m.tracked // append-only: the prefix stays valid
	m.trackMu.Unlock()
	for _, st := range tracked {
		p := st.cells.Load()
		if p == nil || st.key.m == nil {
			continue
		}
		sum := newLaneCells(st.key.m)
		for i := range *p {
			cc := &(*p)[i]
			var ended uint64
			for b := range cc.lat {
				n := cc.lat[b].Load()
				sum.lat[b] += n
				ended += n
			}
			sum.latSum += time.Duration(cc.latSum.Load())
			sum.ok += cc.ok.Load()
			calls := cc.calls.Load()
			sum.calls += calls
			sum.inflight += int64(calls - ended)
			sum.reqBytes += cc.reqBytes.Load()
			sum.repBytes += cc.repBytes.Load()
		}
		addCells(snap.cells, st.key, sum)
	}
	for i := range m.ioc {
		c := &m.ioc[i]
		snap.io[trTCP][0] += c.in[ioTCP].Load()
		snap.io[trTCP][1] += c.out[ioTCP].Load()
		snap.io[trThrift][0] += c.in[ioThrift].Load()
		snap.io[trThrift][1] += c.out[ioThrift].Load()
	}
}
