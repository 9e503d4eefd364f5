package streamcore

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// dataFrame is a stream data frame of id whose payload is n bytes of c.
func dataFrame(id int32, n int, c byte) []byte {
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+n)
	b = append(b, bytes.Repeat([]byte{c}, n)...)
	wire.SealFrame(b, wire.KindStreamData, 0, id, 0)
	return b
}

// Take carries as many whole frames as fit in its limit (at least one,
// however large), in the order written, and keeps the rest.
func TestOutboxTake(t *testing.T) {
	a, b, c := dataFrame(1, 100, 'a'), dataFrame(1, 100, 'b'), dataFrame(1, 5000, 'c')
	tests := []struct {
		name  string
		limit int
		takes [][]byte
	}{
		{"all in one", 1 << 20, [][]byte{cat(a, b, c)}},
		{"two fit", len(a) + len(b) + 10, [][]byte{cat(a, b), c}},
		{"one at a time", len(a), [][]byte{a, b, c}},
		{"a frame past the limit goes alone", 10, [][]byte{a, b, c}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox()
			for _, f := range [][]byte{a, b, c} {
				require.NoError(t, o.Write(f))
			}
			for _, want := range tt.takes {
				require.Equal(t, want, o.Take(nil, tt.limit))
			}
			require.Zero(t, o.Len())
			require.Empty(t, o.Take(nil, tt.limit))
		})
	}
}

// Frames taken into a lease land there whole; a lease too short (or
// none) gets a buffer of their size instead; writes between takes reuse
// the room taken already, the frames' order intact.
func TestOutboxTakeLease(t *testing.T) {
	o := NewOutbox()
	var asked []int
	lease := make([]byte, 64<<10)
	short := func(n int) []byte { asked = append(asked, n); return lease[:n-1] }
	long := func(n int) []byte { asked = append(asked, n); return lease[:n] }
	f := func(i int) []byte { return dataFrame(1, 1000+i, byte('a'+i)) }

	require.NoError(t, o.Write(f(0)))
	require.NoError(t, o.Write(f(1)))
	got := o.TakeLease(1<<20, long)
	require.Equal(t, cat(f(0), f(1)), got)
	require.Same(t, &lease[0], &got[0], "taken into the lease")

	require.NoError(t, o.Write(f(2)))
	got = o.TakeLease(1<<20, short)
	require.Equal(t, f(2), got)
	require.NotSame(t, &lease[0], &got[0], "a short lease is not used")
	require.Equal(t, []int{len(f(0)) + len(f(1)), len(f(2))}, asked)

	// Writes between takes (one filling the buffer's end moves the
	// queue to the front, taken room, rather than grow): order intact.
	var want [][]byte
	for i := 3; i < 40; i++ {
		require.NoError(t, o.Write(f(i)))
		want = append(want, f(i))
		if i%3 == 0 {
			require.Equal(t, want[0], o.TakeLease(len(want[0]), long))
			want = want[1:]
		}
	}
	require.Equal(t, cat(want...), o.TakeLease(1<<20, long))
	require.Zero(t, o.Len())
	require.Nil(t, o.TakeLease(0, func(int) []byte { t.Fatal("nothing queued: no lease"); return nil }))
}

// A take that finds the outbox closed while it waited for its lease
// takes nothing; writes after Close fail.
func TestOutboxClosedMidTake(t *testing.T) {
	o := NewOutbox()
	require.NoError(t, o.Write(dataFrame(1, 10, 'x')))
	got := o.TakeLease(1<<20, func(n int) []byte {
		o.Close()
		return make([]byte, n)
	})
	require.Nil(t, got)
	require.ErrorIs(t, o.Write(dataFrame(1, 1, 'y')), ErrLaneGone)
	require.Zero(t, o.Len())
}

// WriteVec inserts the refs' values in the head.
func TestOutboxWriteVec(t *testing.T) {
	o := NewOutbox()
	f := dataFrame(3, 12, 'z')
	head := cat(f[:wire.HeaderSize+4], f[wire.HeaderSize+8:])
	require.NoError(t, o.WriteStream(head, []proto.Ref{{Off: wire.HeaderSize + 4, Data: f[wire.HeaderSize+4 : wire.HeaderSize+8]}}, true))
	require.Equal(t, f, o.Take(nil, 1<<20))
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// A lease lent to an empty outbox receives the frames written while they
// fit, in place and in order (refs' values inserted); a frame that does
// not fit, and every one after it, is queued instead, for the next take.
// Lend refuses while frames are queued, while a lease is lent, and once
// closed; Reclaim of an unused lease is nil.
func TestOutboxLend(t *testing.T) {
	a, b, c := dataFrame(1, 100, 'a'), dataFrame(1, 200, 'b'), dataFrame(1, 5000, 'c')
	vec := dataFrame(2, 12, 'z')
	head := cat(vec[:wire.HeaderSize+4], vec[wire.HeaderSize+8:])
	refs := []proto.Ref{{Off: wire.HeaderSize + 4, Data: vec[wire.HeaderSize+4 : wire.HeaderSize+8]}}
	tests := []struct {
		name     string
		leaseLen int
		writes   [][]byte
		lent     []byte // Reclaim's frames
		queued   []byte // the take's after it
	}{
		{"all fit", 1 << 20, [][]byte{a, b, c}, cat(a, b, c), nil},
		{"exactly full", len(a) + len(b), [][]byte{a, b}, cat(a, b), nil},
		{"the first past the room and the rest queued", len(a) + len(b) + 10, [][]byte{a, b, c, a}, cat(a, b), cat(c, a)},
		{"none fits", 10, [][]byte{a, b}, nil, cat(a, b)},
		{"nothing written", 1 << 10, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox()
			lease := make([]byte, tt.leaseLen)
			require.True(t, o.Lend(lease))
			require.False(t, o.Lend(make([]byte, 10)), "one lease at a time")
			for _, f := range tt.writes {
				require.NoError(t, o.Write(f))
			}
			require.Equal(t, len(tt.lent)+len(tt.queued), o.Len())
			got := o.Reclaim()
			if tt.lent == nil {
				require.Nil(t, got)
			} else {
				require.Equal(t, tt.lent, got)
				require.Same(t, &lease[0], &got[0], "written in the lease")
			}
			require.Equal(t, len(tt.queued), o.Len())
			require.Equal(t, tt.queued, o.Take(nil, 1<<20))
			require.Nil(t, o.Reclaim(), "lent no more")
		})
	}

	t.Run("refs inserted", func(t *testing.T) {
		o := NewOutbox()
		require.True(t, o.Lend(make([]byte, 1<<10)))
		require.NoError(t, o.WriteStream(head, refs, true))
		require.Equal(t, vec, o.Reclaim())
	})
	t.Run("wakes a waiting taker", func(t *testing.T) {
		o := NewOutbox()
		require.True(t, o.Lend(make([]byte, 1<<10)))
		require.NoError(t, o.Write(a))
		select {
		case <-o.Wake():
		default:
			t.Fatal("no wake after a write into the lease")
		}
	})
	t.Run("refused with frames queued", func(t *testing.T) {
		o := NewOutbox()
		require.NoError(t, o.Write(a))
		require.False(t, o.Lend(make([]byte, 1<<10)))
		require.Equal(t, a, o.Take(nil, 1<<20))
		require.True(t, o.Lend(make([]byte, 1<<10)), "empty again")
	})
	t.Run("closed", func(t *testing.T) {
		o := NewOutbox()
		require.True(t, o.Lend(make([]byte, 1<<10)))
		require.NoError(t, o.Write(a))
		o.Close()
		require.Nil(t, o.Reclaim(), "dropped with the queue")
		require.Zero(t, o.Len())
		require.False(t, o.Lend(make([]byte, 1<<10)))
		require.ErrorIs(t, o.Write(a), ErrLaneGone)
	})
}

// The next reply's lease is lent in the step that hands this reply's
// frames back (ReclaimLend) or takes them out of the queue
// (TakeLeaseLend): frames written after it go into it. Not when frames
// stay queued (they keep their order), when nothing came back to reclaim,
// or when there is no next lease; a take leaves no lease lent then.
func TestOutboxLendNext(t *testing.T) {
	a, b, c := dataFrame(1, 100, 'a'), dataFrame(1, 200, 'b'), dataFrame(1, 300, 'c')
	tests := []struct {
		name     string
		lease    int      // the lease lent first (0: none; the frames are queued)
		writes   [][]byte // before the step
		next     bool     // a next lease is offered
		limit    int      // the take's
		got      []byte   // the step's frames
		lent     bool
		queued   []byte // after the step, before the write of c
		inLease2 []byte // c written after the step lands here, or queued
	}{
		{"reclaim: next lent", 1 << 10, [][]byte{a, b}, true, 0, cat(a, b), true, nil, c},
		{"reclaim: frames queued past the lease", len(a), [][]byte{a, b}, true, 0, a, false, b, nil},
		{"reclaim: nothing came back", 1 << 10, nil, true, 0, nil, false, nil, nil},
		{"reclaim: no next lease", 1 << 10, [][]byte{a}, false, 0, a, false, nil, nil},
		{"take: next lent", 0, [][]byte{a, b}, true, 1 << 10, cat(a, b), true, nil, c},
		{"take: frames left queued", 0, [][]byte{a, b}, true, len(a), a, false, b, nil},
		{"take: no next lease", 0, [][]byte{a}, false, 1 << 10, a, false, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox()
			if tt.lease > 0 {
				require.True(t, o.Lend(make([]byte, tt.lease)))
			}
			for _, f := range tt.writes {
				require.NoError(t, o.Write(f))
			}
			var next []byte
			if tt.next {
				next = make([]byte, 1<<10)
			}
			var got []byte
			var lent bool
			if tt.lease > 0 {
				got, lent = o.ReclaimLend(next)
			} else {
				var into []byte
				got, lent = o.TakeLeaseLend(tt.limit, func(n int) []byte { return make([]byte, n) }, func(dst []byte) []byte {
					into = dst
					return next
				})
				require.Equal(t, len(got), len(into), "next is asked with the take's memory")
			}
			if tt.got == nil {
				require.Empty(t, got)
			} else {
				require.Equal(t, tt.got, got)
			}
			require.Equal(t, tt.lent, lent)
			require.Equal(t, len(tt.queued), o.Len())
			require.NoError(t, o.Write(c))
			if tt.inLease2 != nil {
				require.Equal(t, tt.inLease2, o.Reclaim())
				require.Equal(t, tt.inLease2, next[:len(tt.inLease2)], "written in the next lease")
				return
			}
			require.Nil(t, o.Reclaim(), "no lease lent")
			require.Equal(t, cat(tt.queued, c), o.Take(nil, 1<<20))
		})
	}
}

// A loan wakes its taker and runs what Finally left only once every
// message lent is back: returned one by one, or abandoned at once.
func TestLoan(t *testing.T) {
	tests := []struct {
		name    string
		lent    int
		back    func(*Loan)
		finally bool // Finally before the messages come back
	}{
		{"nothing out runs at once", 0, func(*Loan) {}, true},
		{"returned", 3, func(l *Loan) { l.Return(); l.Return(); l.Return() }, true},
		{"abandoned", 3, func(l *Loan) { l.Return(); l.Abandon() }, true},
		{"wakes without finally", 2, func(l *Loan) { l.Return(); l.Return() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLoan()
			for range tt.lent {
				l.Lend()
			}
			require.Equal(t, tt.lent, l.Out())
			ran := 0
			if tt.finally {
				l.Finally(func() { ran++ })
				if tt.lent > 0 {
					require.Zero(t, ran, "ran with messages out")
				}
			}
			tt.back(l)
			require.Zero(t, l.Out())
			if tt.finally {
				require.Equal(t, 1, ran)
			}
			if tt.lent > 0 {
				select {
				case <-l.Wake():
				default:
					t.Fatal("no wake once all came back")
				}
			}
			l.Abandon() // nothing out: no second run
			require.LessOrEqual(t, ran, 1)
		})
	}
}

// A hushed loan does not wake its taker when the last message is
// returned (the lane runner that offered its turn to the caller), but
// does when the messages are abandoned; Finally runs either way.
func TestLoanHush(t *testing.T) {
	tests := []struct {
		name  string
		hush  bool
		back  func(*Loan)
		woken bool
	}{
		{"returned", false, func(l *Loan) { l.Return(); l.Return() }, true},
		{"returned hushed", true, func(l *Loan) { l.Return(); l.Return() }, false},
		{"abandoned hushed", true, func(l *Loan) { l.Return(); l.Abandon() }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLoan()
			l.Lend()
			l.Lend()
			l.Hush(tt.hush)
			ran := 0
			l.Finally(func() { ran++ })
			tt.back(l)
			require.Zero(t, l.Out())
			require.Equal(t, 1, ran)
			select {
			case <-l.Wake():
				require.True(t, tt.woken, "woken while hushed")
			default:
				require.False(t, tt.woken, "not woken")
			}
			l.Hush(false)
			l.Lend()
			l.Return()
			select {
			case <-l.Wake():
			default:
				t.Fatal("not woken once unhushed")
			}
		})
	}
}

// A writer that fills HandOff bytes of a lent lease yields its processor
// once a lease, so the lane's goroutine its writes woke sends them while
// it writes on (on one processor, without the yield the taker would
// first run once the writer is done). Each lease lent anew yields again,
// and nothing yields for frames queued in the outbox's own buffer. The
// yields are counted through the handOff hook: the scheduler's choice of
// what runs after one (under -race and load an asynchronous preemption
// ran the taker early) is not what is tested.
func TestOutboxHandOff(t *testing.T) {
	const size = 64 << 10
	frame := dataFrame(1, size, 'x')
	perLease := (HandOff + len(frame) - 1) / len(frame) // frames written when it yields
	tests := []struct {
		name  string
		again func(o *Outbox, lease []byte) bool // lends the second lease
	}{
		{"reclaim and lend", func(o *Outbox, lease []byte) bool {
			_, lent := o.ReclaimLend(lease)
			return lent
		}},
		{"reclaim, then lend", func(o *Outbox, lease []byte) bool {
			o.Reclaim()
			return o.Lend(lease)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox()
			var at []int // the outbox's length at each yield
			handOff = func() { at = append(at, o.Len()) }
			t.Cleanup(func() { handOff = runtime.Gosched })
			write := func(frames int) {
				for range frames {
					require.NoError(t, o.Write(frame))
				}
			}
			write(1) // queued in the outbox's buffer: no lease, no yield
			require.Equal(t, len(frame), len(o.Take(nil, 2*len(frame))))
			require.Empty(t, at)

			require.True(t, o.Lend(make([]byte, 2*HandOff)))
			write(perLease - 1)
			require.Empty(t, at, "before HandOff")
			write(1)
			require.Equal(t, []int{perLease * len(frame)}, at, "the first lease yields when it holds HandOff")
			write(perLease - 1)
			require.Len(t, at, 1, "once a lease")

			require.True(t, tt.again(o, make([]byte, 2*HandOff)))
			write(perLease)
			require.Equal(t, []int{perLease * len(frame), perLease * len(frame)}, at, "and again for the second")
			require.Equal(t, perLease*len(frame), len(o.Reclaim()))
		})
	}
}
