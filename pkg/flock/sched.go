package flock

import (
	"cmp"
	"slices"
)

// SenderLoad is what the receiver-side QP scheduler knows about one sender.
type SenderLoad struct {
	QPs int    // QPs the sender's connection owns: the most it can use
	U   uint64 // utilisation: sum of reported coalescing degrees since the last redistribution
}

// AllocateQPs is eq. 3.1: sender i gets MAX_AQP·U_i/ΣU active QPs, a
// dormant sender (U_i = 0) exactly one. To keep the total at or under
// maxAQP, dormant senders' QPs come off the budget first and every
// functioning sender is guaranteed one; the rest of the budget is shared in
// proportion to U (largest remainders first), capped by each sender's QPs.
// If there are more senders than maxAQP each still keeps one QP, the floor
// the paper gives dormant senders.
func AllocateQPs(senders []SenderLoad, maxAQP int) []int {
	out := make([]int, len(senders))
	var sumU uint64
	functioning := 0
	for i, s := range senders {
		if s.QPs <= 0 {
			continue
		}
		out[i] = 1
		if s.U > 0 {
			sumU += s.U
			functioning++
		}
	}
	budget := maxAQP - countPositive(out)
	if budget <= 0 || sumU == 0 {
		return out
	}
	type rem struct {
		i    int
		frac uint64
	}
	rems := make([]rem, 0, functioning)
	used := 0
	for i, s := range senders {
		if s.U == 0 || s.QPs <= 0 {
			continue
		}
		num := uint64(budget) * s.U
		extra := int(num / sumU)
		if extra > s.QPs-1 {
			extra = s.QPs - 1
		}
		out[i] += extra
		used += extra
		rems = append(rems, rem{i, num % sumU})
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return cmp.Compare(b.frac, a.frac) })
	for left := budget - used; left > 0; {
		progress := false
		for _, r := range rems {
			if left == 0 {
				break
			}
			if out[r.i] < senders[r.i].QPs {
				out[r.i]++
				left--
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	return out
}

func countPositive(xs []int) int {
	n := 0
	for _, x := range xs {
		if x > 0 {
			n++
		}
	}
	return n
}

// NewSenderShare is what a joining sender gets: the average allocation of
// the functioning senders (all of maxAQP if there are none), limited by the
// QPs still free under maxAQP and by its own QP count, and never below one.
func NewSenderShare(functioning []int, totalActive, maxAQP, qps int) int {
	share := maxAQP
	if len(functioning) > 0 {
		sum := 0
		for _, a := range functioning {
			sum += a
		}
		share = sum / len(functioning)
	}
	share = min(share, maxAQP-totalActive, qps)
	return max(share, 1)
}

// CallerLoad is what the sender-side goroutine scheduler knows about one
// caller since the last scheduling round.
type CallerLoad struct {
	ID         uint32
	MedianSize int    // median request size
	Count      uint64 // requests sent
	Bytes      uint64 // bytes sent
	Current    int    // QP the caller uses now
}

// sizeBreak: a caller whose median request is this many times the first
// caller's on the QP being filled starts the next QP.
const sizeBreak = 8

// AssignCallers is Algorithm 1. Busy callers, sorted by median request size
// then request count, fill the active QPs in order, each QP taking callers
// until its load reaches total/len(active); so small-request callers share
// QPs with each other and not with large ones. One addition to the paper's
// pseudo-code: plain quota filling lets the last small callers and the
// first large one share a QP whenever the small ones' bytes are below the
// quota (they nearly always are), so a jump in median size by sizeBreak
// also closes the QP while QPs remain. Idle callers keep their QP if it is
// still active and are otherwise spread round-robin.
func AssignCallers(callers []CallerLoad, active []int) map[uint32]int {
	out := make(map[uint32]int, len(callers))
	if len(active) == 0 {
		return out
	}
	isActive := make(map[int]bool, len(active))
	for _, q := range active {
		isActive[q] = true
	}
	busy := make([]CallerLoad, 0, len(callers))
	var total uint64
	rr := 0
	for _, c := range callers {
		if c.Bytes == 0 {
			if isActive[c.Current] {
				out[c.ID] = c.Current
			} else {
				out[c.ID] = active[rr%len(active)]
				rr++
			}
			continue
		}
		busy = append(busy, c)
		total += c.Bytes
	}
	slices.SortStableFunc(busy, func(a, b CallerLoad) int {
		if c := cmp.Compare(a.MedianSize, b.MedianSize); c != 0 {
			return c
		}
		return cmp.Compare(a.Count, b.Count)
	})
	quota := (total + uint64(len(active)) - 1) / uint64(len(active))
	qp, load, first := 0, uint64(0), 0
	for _, c := range busy {
		if load > 0 && c.MedianSize >= sizeBreak*max(first, 1) && qp < len(active)-1 {
			qp++
			load = 0
		}
		if load == 0 {
			first = c.MedianSize
		}
		load += c.Bytes
		out[c.ID] = active[qp]
		if load >= quota && qp < len(active)-1 {
			qp++
			load = 0
		}
	}
	return out
}

// medianU32 is the median of xs (xs is reordered); 0 for none.
func medianU32(xs []uint32) int {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return int(xs[len(xs)/2])
}

// medianHist is the median value of a histogram whose bucket i counts
// observations of value i.
func medianHist(h []uint32) int {
	var n uint64
	for _, c := range h {
		n += uint64(c)
	}
	if n == 0 {
		return 0
	}
	half := (n + 1) / 2
	var acc uint64
	for v, c := range h {
		acc += uint64(c)
		if acc >= half {
			return v
		}
	}
	return len(h) - 1
}
