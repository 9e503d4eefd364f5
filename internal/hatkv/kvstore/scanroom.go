package kvstore

import "context"

// ScanRoom is asked, while a Scan reads (ScanCut, ScanWire), whether its
// answer may grow to bytes of keys and records (counted as against
// Limits.MaxScanBytes) in records records. It is asked ahead, in steps,
// not for every record; when it says no, the Scan stops before the
// record that would pass what it granted, as at MaxScanBytes (returning
// at least one record) and reports the Scan cut. hatkv's server answers
// with the room the call's reply has in the RPC server's memory budget.
type ScanRoom func(bytes, records int) bool

type scanRoomKey struct{}

// WithScanRoom returns ctx with room asked by the Scans run with it. A
// context rather than a parameter: the store's Scan methods keep their
// signatures (and the Store interfaces theirs), and a Scan run without
// one is bounded by MaxScanBytes alone.
func WithScanRoom(ctx context.Context, room ScanRoom) context.Context {
	return context.WithValue(ctx, scanRoomKey{}, room)
}

// scanRoomStep is the least a Scan asks for beyond what it was granted
// (a Scan of 10,000 records of 1 KiB asks about 20 times), and
// scanRoomMin the least once asking ahead was refused.
const (
	scanRoomStep = 256 << 10
	scanRoomMin  = 4 << 10
)

// scanRoom is a Scan's use of its ScanRoom.
type scanRoom struct {
	fn      ScanRoom
	granted int
	refused bool // asking ahead was refused: ask for less, halving
	step    int
}

func roomOf(ctx context.Context) scanRoom {
	fn, _ := ctx.Value(scanRoomKey{}).(ScanRoom)
	return scanRoom{fn: fn}
}

// fits reports whether the answer may grow to bytes in records. Past
// what was granted it asks ahead, a quarter more (at least
// scanRoomStep); refused, it asks for half as much ahead, down to
// scanRoomMin, then for bytes alone, and keeps the smaller step: a
// Scan near the end of its room asks a few times per step, not once
// per record.
func (r *scanRoom) fits(bytes, records int) bool {
	if r.fn == nil || bytes <= r.granted {
		return true
	}
	if !r.refused {
		r.step = max(bytes/4, scanRoomStep)
	}
	for ; r.step >= scanRoomMin; r.step /= 2 {
		ahead := bytes + r.step
		if r.fn(ahead, records*ahead/bytes+1) {
			r.granted = ahead
			return true
		}
		r.refused = true
	}
	if r.fn(bytes, records) {
		r.granted = bytes
		return true
	}
	return false
}
