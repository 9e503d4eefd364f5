package client

import (
	"iter"
	"math/bits"
)

// callRing is the number of places in a callTable's ring: more than the
// calls one connection usually has outstanding, so that a call numbered
// callRing after one still waiting rarely finds its place taken.
const callRing = 128

// callTable is a session's outstanding calls by seqid. A session numbers
// its calls one after another, so the call for seq is kept at seq mod
// callRing, and the map is used only when that place holds a call still
// outstanding: a store and a load a call instead of a map insert, lookup
// and delete (2 % of a client's CPU at 64 callers with the map alone).
// Callers hold the session's mu.
type callTable struct {
	ring  [callRing]*call
	used  [callRing / 64]uint64 // places in use, for all and len
	n     int                   // calls in the ring
	spill map[int32]*call       // calls whose place was taken
}

func callSlot(seq int32) int { return int(uint32(seq) % callRing) }

// put registers cl, whose seq field is seq.
func (t *callTable) put(seq int32, cl *call) {
	i := callSlot(seq)
	if t.ring[i] == nil {
		t.ring[i] = cl
		t.used[i/64] |= 1 << (i % 64)
		t.n++
		return
	}
	if t.spill == nil {
		t.spill = map[int32]*call{}
	}
	t.spill[seq] = cl
}

// get returns the call for seq, nil if none.
func (t *callTable) get(seq int32) *call {
	if cl := t.ring[callSlot(seq)]; cl != nil && cl.seq == seq {
		return cl
	}
	if len(t.spill) == 0 {
		return nil
	}
	return t.spill[seq]
}

// take removes the call for seq and returns it, nil if none.
func (t *callTable) take(seq int32) *call {
	i := callSlot(seq)
	if cl := t.ring[i]; cl != nil && cl.seq == seq {
		t.ring[i] = nil
		t.used[i/64] &^= 1 << (i % 64)
		t.n--
		return cl
	}
	if len(t.spill) == 0 {
		return nil
	}
	cl, ok := t.spill[seq]
	if ok {
		delete(t.spill, seq)
	}
	return cl
}

// len returns the number of outstanding calls.
func (t *callTable) len() int { return t.n + len(t.spill) }

// all yields the outstanding calls, the ring's in the order of their
// places, then the map's. The loop may take the call it was given.
func (t *callTable) all() iter.Seq2[int32, *call] {
	return func(yield func(int32, *call) bool) {
		for w := range t.used {
			for m := t.used[w]; m != 0; m &= m - 1 {
				if cl := t.ring[w*64+bits.TrailingZeros64(m)]; cl != nil && !yield(cl.seq, cl) {
					return
				}
			}
		}
		for seq, cl := range t.spill {
			if !yield(seq, cl) {
				return
			}
		}
	}
}
