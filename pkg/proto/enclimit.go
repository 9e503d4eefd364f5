package proto

import (
	"fmt"
	"math"
)

// Encoding limits.
//
// A server builds a reply by encoding its handler's result into a buffer
// that grows as needed; a result far larger than the message limit (a
// Scan of 1 GB against a 64 MiB limit) made a buffer of its size, only
// for the reply to be refused afterwards (issue 43, D2). A writer with a
// limit (SetLimit) keeps at most that many bytes: once the message would
// pass it, what it wrote is dropped and what follows only counted, so the
// buffer stays about the limit's size while Size still reports what the
// whole message takes (the refusal names it). A string or binary value
// is copied only as far as the room goes (past it, the binary writer's
// length prefix is not kept either), a run of list elements is checked
// before it is copied, a scalar written one by one (an enum list, a map's
// entries) and a container header are dropped once they passed it, and
// the buffer is checked at the end of each struct; in between a writer
// adds only a struct's fixed-size fields. The checks cost the writers a
// compare (fit, drop, check); past, the rare path, is a call.

// encLimit is a writer's limit state (BinaryWriter, CompactWriter), set
// by NewBinaryWriter, NewCompactWriter and Reset: a writer that was
// neither made by them nor Reset has a limit of 0.
type encLimit struct {
	lim      int // the most the buffer's length may reach; math.MaxInt without a limit
	base     int // the buffer's length at Reset: what came before is the caller's
	refBytes int // bytes of the values left out as refs (they count towards the limit)
	dropped  int // once over: the buffer's bytes counted since base, not kept
	skipped  int // bytes of values not copied for want of room (fit), counted
	over     bool
}

func (l *encLimit) reset(base int) { *l = encLimit{lim: math.MaxInt, base: base} }

// setLimit lets the message since Reset take n bytes at most (refs
// included); n <= 0 removes the limit.
func (l *encLimit) setLimit(n int) {
	if n <= 0 {
		l.lim = math.MaxInt
		return
	}
	l.lim = l.base + n - l.refBytes
}

// past reports whether n more bytes pass the limit; then what the buffer
// holds since base is counted and dropped (and from then on everything
// written is), and the caller writes nothing. Writers call it when a
// cheap check saw the limit passed (n may be the exact size the check
// over-estimated). False when the bytes fit. It is kept out of line so
// that the writers' methods stay small (a check costs them a compare).
//
//go:noinline
func (l *encLimit) past(buf *[]byte, n int) bool {
	if !l.over && len(*buf)+n <= l.lim {
		return false
	}
	if !l.over {
		l.over, l.lim = true, l.base
	}
	l.dropped += len(*buf) - l.base + n
	*buf = (*buf)[:l.base]
	return true
}

// check drops what the buffer holds past the limit (after a header or a
// struct's end was appended).
func (l *encLimit) check(buf *[]byte) {
	if len(*buf) > l.lim {
		l.past(buf, 0)
	}
}

// drop is check without a call, for the writers that append a scalar, a
// container header or a value's length prefix: inlined, it costs them a
// compare while the message fits, and past the limit it counts and drops
// what they appended, so the buffer never holds more than one of them
// past it. Before it, scalars written one by one (an enum list, a map of
// i32 to double) were appended until the struct's end: 32 MiB of i64s
// against a 1 MiB limit allocated 201 MB. It repeats past's body (kept
// in sync with it) because a call would put the binary writer's scalar
// methods past the inlining budget.
func (l *encLimit) drop(buf *[]byte) {
	if len(*buf) > l.lim {
		l.over, l.lim = true, l.base
		l.dropped += len(*buf) - l.base
		*buf = (*buf)[:l.base]
	}
}

// fit is how much of a value of n bytes to copy into a buffer of length
// ln: all of it within the limit, else what the room has left; the rest
// is counted (and the message is over the limit). No call and no
// allocation, so the string and binary writers stay inlinable.
func (l *encLimit) fit(ln, n int) int {
	k := min(n, max(l.lim-ln, 0))
	l.skipped += n - k
	return k
}

// fitPrefixed is fit for a value of n bytes after its 4-byte length
// prefix, the end of b: past the limit the prefix too is counted, not
// kept, so strings past the room do not grow the buffer by their
// prefixes (a million 1 KiB strings past a 1 MiB room allocated 26.5 MB).
func (l *encLimit) fitPrefixed(b []byte, n int) ([]byte, int) {
	k := min(n, max(l.lim-len(b), 0))
	l.skipped += n - k
	if len(b) > l.lim {
		b = b[:len(b)-4]
		l.skipped += 4
	}
	return b, k
}

// noteRef records v, left out of the buffer at off, in refs and counts
// it; past the limit it is only counted (refs are invalid then, and a
// JSON writer, which leaves every binary value out, would otherwise keep
// a Ref for each value of the result). Counted after the limit was passed
// too: large binaries written then (in the structs after the one whose
// end passed it) were missing from the size a refusal named.
func (l *encLimit) noteRef(refs *[]Ref, off int, v []byte) {
	if !l.over {
		*refs = append(*refs, Ref{Off: off, Data: v})
	}
	l.refBytes += len(v)
	l.lim -= len(v) // math.MaxInt less n is no limit still
}

// size is the bytes written since Reset, refs included, kept or not.
func (l *encLimit) size(buf []byte) int {
	return l.dropped + len(buf) - l.base + l.refBytes + l.skipped
}

// SetLimit makes the writer keep at most n bytes of what it writes from
// now until the next Reset, refs included (see the top of enclimit.go);
// n <= 0 removes the limit. Reset removes it too. Call it after Reset.
func (w *BinaryWriter) SetLimit(n int) { w.setLimit(n) }

// Over reports whether what was written since Reset passed the limit:
// the buffer then holds nothing of it, and refs recorded are invalid.
func (w *BinaryWriter) Over() bool { return w.over || w.skipped > 0 }

// Size is the bytes written since Reset, refs included, whether kept or,
// past the limit, only counted.
func (w *BinaryWriter) Size() int { return w.size(w.buf) }

// SetLimit is BinaryWriter.SetLimit.
func (w *CompactWriter) SetLimit(n int) { w.setLimit(n) }

// Over is BinaryWriter.Over.
func (w *CompactWriter) Over() bool { return w.over || w.skipped > 0 }

// Size is BinaryWriter.Size.
func (w *CompactWriter) Size() int { return w.size(w.buf) }

// TooLargeError is returned by an encoding whose message passed its
// limit: Size is what the whole message takes, Limit the limit, in bytes.
// With More, Size is only a lower bound, the message takes more than
// Size bytes: a JSON message stops being transcoded at its limit
// (JSONCodec.SetLimit), as its size past it would take reading every
// string for escapes. It matches ErrSizeLimit (errors.Is).
type TooLargeError struct {
	Size, Limit int
	More        bool
}

func (e *TooLargeError) Error() string {
	if e.More {
		return fmt.Sprintf("proto: message of more than %d bytes exceeds the encoding limit of %d bytes", e.Size, e.Limit)
	}
	return fmt.Sprintf("proto: message of %d bytes exceeds the encoding limit of %d bytes", e.Size, e.Limit)
}

func (e *TooLargeError) Unwrap() error { return ErrSizeLimit }
