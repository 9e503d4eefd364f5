package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplyChargeAllocs: charging every reply costs a TCP call no
// allocation when nothing waits for memory: the reader's reservation,
// the built reply's admission in exchange for it (HatRPC, and a plain
// connection's in order) and its release once written.
func TestReplyChargeAllocs(t *testing.T) {
	s := New(WithMemoryBudget(1<<20, 1<<20))
	defer s.budget.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, hat := range []bool{true, false} {
		c := &conn{s: s, ctx: ctx}
		var order uint64
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			to := replyTo{hat: hat, order: order}
			order++
			if err := s.budget.reserve(c, &to.mem, 400, 0); err != nil {
				t.Fatal(err)
			}
			if !c.admitReply(&to, 300) {
				t.Fatal("reply not admitted")
			}
			s.budget.release(c, 300)
		}), "hat %v", hat)
		require.Zero(t, c.memHeld)
	}
	require.Zero(t, s.budget.used)
}

// TestReserveReplyAllocs: a handler's ReserveReply that fits costs no
// allocation (finding the call through its context included).
func TestReserveReplyAllocs(t *testing.T) {
	s := New(WithMemoryBudget(1<<20, 1<<20))
	defer s.budget.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &conn{s: s, ctx: ctx}
	r := &request{conn: c}
	var slab ctxSlab
	cc := slab.next(ctx, 0)
	cc.rq = r
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		if err := ReserveReply(cc, 1000); err != nil {
			t.Fatal(err)
		}
		s.budget.release(c, r.mem)
		r.mem = 0
	}))
	require.Zero(t, s.budget.used)
}
