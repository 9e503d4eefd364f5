package rdma

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every opcode, every size, on one device and across two devices.
func TestOpcodes(t *testing.T) {
	sizes := []int{1, 64, 4096, 128 << 10}
	ops := []Opcode{OpSend, OpSendWithImm, OpRDMAWrite, OpRDMAWriteWithImm, OpRDMARead}
	for _, two := range []bool{false, true} {
		a, b := newPair(t, pairCfg{twoDevices: two})
		for _, op := range ops {
			for _, n := range sizes {
				t.Run(fmt.Sprintf("two=%v/%v/%d", two, op, n), func(t *testing.T) {
					src, dst := a.mr.Bytes()[:n], b.mr.Bytes()[:n]
					clear(dst)
					fill(src, byte(n)+byte(op))
					wr := sendWR(uint64(n), op, Signaled, a.mr.SGE(0, n))
					wr.Imm = 0xabc000 + uint32(n)
					wr.RemoteAddr, wr.RKey = a.peer.Buffers[0].Addr, a.peer.Buffers[0].RKey
					consumesRecv := op == OpSend || op == OpSendWithImm || op == OpRDMAWriteWithImm
					if consumesRecv {
						require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(7, b.mr.SGE(0, b.mr.Len()))}))
					}
					if op == OpRDMARead {
						fill(dst, 3)
						clear(src)
					}
					require.NoError(t, a.qp.PostSend([]SendWR{wr}))
					wc := waitN(t, a.scq, 1)[0]
					require.NoError(t, wc.Err())
					require.Equal(t, sendCompletionOp(op), wc.Opcode)
					require.Equal(t, uint64(n), wc.WRID)
					if op == OpRDMARead {
						// ibv_poll_cq(3): byte_len is defined on the send
						// side only for READ and atomics.
						require.Equal(t, uint32(n), wc.ByteLen)
					}
					if consumesRecv {
						rc := waitN(t, b.rcq, 1)[0]
						require.NoError(t, rc.Err())
						require.Equal(t, uint64(7), rc.WRID)
						require.Equal(t, uint32(n), rc.ByteLen)
						if op == OpRDMAWriteWithImm {
							require.Equal(t, OpRecvRDMAWithImm, rc.Opcode)
						} else {
							require.Equal(t, OpRecv, rc.Opcode)
						}
						require.Equal(t, op != OpSend, rc.HasImm())
						if op != OpSend {
							require.Equal(t, wr.Imm, rc.Imm)
						}
					} else {
						expectNone(t, b.rcq, time.Millisecond)
					}
					require.Equal(t, src, dst)
				})
			}
		}
	}
}

func TestAtomics(t *testing.T) {
	a, b := newPair(t, pairCfg{})
	remote := a.peer.Buffers[0]
	binary.LittleEndian.PutUint64(b.mr.Bytes()[8:], 100)
	tests := []struct {
		name     string
		op       Opcode
		add, cmp uint64
		swap     uint64
		wantOld  uint64
		wantNew  uint64
	}{
		{"fetch-add", OpAtomicFetchAndAdd, 5, 0, 0, 100, 105},
		{"cas-miss", OpAtomicCmpAndSwp, 0, 1, 9, 105, 105},
		{"cas-hit", OpAtomicCmpAndSwp, 0, 105, 9, 105, 9},
		{"fetch-add-wrap", OpAtomicFetchAndAdd, ^uint64(8), 0, 0, 9, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wr := sendWR(uint64(i), tc.op, Signaled, a.mr.SGE(64, 8))
			wr.RemoteAddr, wr.RKey = remote.Addr+8, remote.RKey
			wr.CompareAdd, wr.Swap = tc.add, tc.swap
			if tc.op == OpAtomicCmpAndSwp {
				wr.CompareAdd = tc.cmp
			}
			require.NoError(t, a.qp.PostSend([]SendWR{wr}))
			wc := waitN(t, a.scq, 1)[0]
			require.NoError(t, wc.Err())
			require.Equal(t, tc.op, wc.Opcode)
			require.Equal(t, tc.wantOld, binary.LittleEndian.Uint64(a.mr.Bytes()[64:]))
			require.Equal(t, tc.wantNew, binary.LittleEndian.Uint64(b.mr.Bytes()[8:]))
		})
	}
	// Misaligned or wrongly sized atomics are refused.
	wr := sendWR(9, OpAtomicFetchAndAdd, Signaled, a.mr.SGE(64, 4))
	wr.RemoteAddr, wr.RKey = remote.Addr, remote.RKey
	require.ErrorIs(t, a.qp.PostSend([]SendWR{wr}), ErrInvalid)
}

// Multiple SGEs on both sides of a SEND, and on a WRITE/READ.
func TestScatterGather(t *testing.T) {
	a, b := newPair(t, pairCfg{})
	src := a.mr.Bytes()
	fill(src[:300], 11)
	clear(b.mr.Bytes()[:4096])
	require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(1, b.mr.SGE(1000, 50), b.mr.SGE(2000, 250))}))
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, a.mr.SGE(0, 100), a.mr.SGE(100, 200))}))
	require.NoError(t, waitN(t, a.scq, 1)[0].Err())
	rc := waitN(t, b.rcq, 1)[0]
	require.NoError(t, rc.Err())
	require.Equal(t, uint32(300), rc.ByteLen)
	got := append(append([]byte{}, b.mr.Bytes()[1000:1050]...), b.mr.Bytes()[2000:2250]...)
	require.Equal(t, src[:300], got)
}

// RC ordering: WRITEs then a SEND in one chain; when the SEND's receive
// completes every WRITE is visible, and completions come back in order.
func TestOrdering(t *testing.T) {
	a, b := newPair(t, pairCfg{twoDevices: true})
	const n = 32
	remote := a.peer.Buffers[0]
	for round := 0; round < 20; round++ {
		src := a.mr.Bytes()
		wrs := make([]SendWR, 0, n+1)
		for i := 0; i < n; i++ {
			fill(src[i*1024:(i+1)*1024], byte(round+i))
			w := sendWR(uint64(i), OpRDMAWrite, Signaled, a.mr.SGE(i*1024, 1024))
			w.RemoteAddr, w.RKey = remote.Addr+uint64(i*1024), remote.RKey
			wrs = append(wrs, w)
		}
		wrs = append(wrs, sendWR(n, OpSend, Signaled, a.mr.SGE(n*1024, 8)))
		require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(uint64(round), b.mr.SGE(200<<10, 64))}))
		require.NoError(t, a.qp.PostSend(wrs))
		rc := waitN(t, b.rcq, 1)[0]
		require.NoError(t, rc.Err())
		require.Equal(t, src[:n*1024], b.mr.Bytes()[:n*1024])
		wcs := waitN(t, a.scq, n+1)
		for i, wc := range wcs {
			require.NoError(t, wc.Err())
			require.Equal(t, uint64(i), wc.WRID, "completion order")
		}
	}
}

func TestInline(t *testing.T) {
	a, b := newPair(t, pairCfg{a: sideCfg{maxInline: 128}})
	caps, err := a.qp.Caps()
	require.NoError(t, err)
	maxInline := caps.MaxInline
	require.GreaterOrEqual(t, maxInline, 128)
	require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(1, b.mr.SGE(0, 4096))}))
	src := a.mr.Bytes()[:maxInline]
	fill(src, 5)
	want := append([]byte(nil), src...)
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled|Inline, a.mr.SGE(0, maxInline))}))
	// Inline data is copied at post time: the buffer is free right away.
	clear(src)
	require.NoError(t, waitN(t, a.scq, 1)[0].Err())
	require.NoError(t, waitN(t, b.rcq, 1)[0].Err())
	require.Equal(t, want, b.mr.Bytes()[:maxInline])
	// Over the limit is refused at post.
	err = a.qp.PostSend([]SendWR{sendWR(2, OpSend, Signaled|Inline, a.mr.SGE(0, maxInline+1))})
	var pe *PostError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 0, pe.Index)
	require.ErrorIs(t, err, ErrInvalid)
}

// Unsignaled WRs complete silently; their send-queue slots are released by
// a later signaled completion, and posting past the depth fails.
func TestSelectiveSignalingAndDepth(t *testing.T) {
	a, b := newPair(t, pairCfg{a: sideCfg{maxSend: 8}})
	caps, err := a.qp.Caps()
	require.NoError(t, err)
	depth := caps.MaxSendWR
	require.GreaterOrEqual(t, depth, 8)
	remote := a.peer.Buffers[0]
	wr := func(id uint64, f SendFlags) SendWR {
		w := sendWR(id, OpRDMAWrite, f, a.mr.SGE(0, 64))
		w.RemoteAddr, w.RKey = remote.Addr, remote.RKey
		return w
	}
	chain := make([]SendWR, 0, depth)
	for i := 0; i < depth-1; i++ {
		chain = append(chain, wr(uint64(i), 0))
	}
	require.NoError(t, a.qp.PostSend(chain))
	expectNone(t, a.scq, time.Millisecond)
	require.NoError(t, a.qp.PostSend([]SendWR{wr(100, Signaled)}))
	// Verbs only promise the slots back once the signaled completion behind
	// the unsignaled ones is polled (ibv_post_send(3)); when a device frees
	// them earlier is its own business, so a post here may or may not fail.
	wcs := waitN(t, a.scq, 1)
	require.Equal(t, uint64(100), wcs[0].WRID)
	full := make([]SendWR, depth)
	for i := range full {
		full[i] = wr(uint64(200+i), 0)
	}
	full[depth-1].Flags = Signaled
	require.NoError(t, a.qp.PostSend(full))
	require.Equal(t, uint64(200+depth-1), waitN(t, a.scq, 1)[0].WRID)
	// A chain that overflows is accepted up to the limit, and exactly the
	// WRs before the failing one were posted. The limit is at least the
	// granted depth; a device may hold more (rxe rounds its rings up to a
	// power of two without saying so), so the chain is long enough for any.
	over := make([]SendWR, 4*depth)
	for i := range over {
		over[i] = wr(uint64(300+i), Signaled)
	}
	err = a.qp.PostSend(over)
	var pe *PostError
	require.ErrorAs(t, err, &pe)
	require.GreaterOrEqual(t, pe.Index, depth)
	require.Less(t, pe.Index, len(over))
	require.ErrorIs(t, err, ErrNoResources)
	got := waitN(t, a.scq, pe.Index)
	require.Equal(t, uint64(300+pe.Index-1), got[len(got)-1].WRID)
	expectNone(t, a.scq, time.Millisecond)

	// Receive queue depth.
	bcaps, err := b.qp.Caps()
	require.NoError(t, err)
	recvs := make([]RecvWR, 4*bcaps.MaxRecvWR)
	for i := range recvs {
		recvs[i] = recvWR(uint64(i), b.mr.SGE(0, 64))
	}
	err = b.qp.PostRecv(recvs)
	require.ErrorAs(t, err, &pe)
	require.GreaterOrEqual(t, pe.Index, bcaps.MaxRecvWR)
	require.Less(t, pe.Index, len(recvs))
	require.ErrorIs(t, err, ErrNoResources)
}

func TestSRQ(t *testing.T) {
	d := openTest(t)
	pd := newPD(t, d)
	srq, err := pd.CreateSRQ(16, 1)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srq.Close()) })
	srv1 := newSide(t, d, pd, sideCfg{srq: srq})
	srv2 := newSide(t, d, pd, sideCfg{srq: srq})
	cli1 := newSide(t, d, pd, sideCfg{})
	cli2 := newSide(t, d, pd, sideCfg{})
	connect(t, cli1, srv1)
	connect(t, cli2, srv2)
	require.ErrorIs(t, srv1.qp.PostRecv([]RecvWR{recvWR(1, srv1.mr.SGE(0, 64))}), ErrInvalid)
	recvs := make([]RecvWR, 4)
	for i := range recvs {
		recvs[i] = recvWR(uint64(i), srv1.mr.SGE(i*64, 64))
	}
	require.NoError(t, srq.PostRecv(recvs))
	for i, c := range []*side{cli1, cli2, cli1, cli2} {
		c.mr.Bytes()[0] = byte(i)
		require.NoError(t, c.qp.PostSend([]SendWR{sendWR(uint64(i), OpSend, Signaled, c.mr.SGE(0, 1))}))
		require.NoError(t, waitN(t, c.scq, 1)[0].Err())
	}
	// Receives are consumed in posting order whichever QP they land on.
	for i, s := range []*side{srv1, srv2, srv1, srv2} {
		rc := waitN(t, s.rcq, 1)[0]
		require.NoError(t, rc.Err())
		require.Equal(t, uint64(i), rc.WRID)
		require.Equal(t, byte(i), srv1.mr.Bytes()[i*64])
	}
	c1, err := srv1.qp.Counters()
	require.NoError(t, err)
	require.Equal(t, uint64(2), c1.Inbound[OpSend])
	// SRQ depth: at least what was granted (verbs may round 16 up, and
	// rxe holds more than it reports).
	require.GreaterOrEqual(t, srq.MaxWR(), 16)
	full := make([]RecvWR, 4*srq.MaxWR())
	for i := range full {
		full[i] = recvWR(uint64(i), srv1.mr.SGE(0, 64))
	}
	err = srq.PostRecv(full)
	var pe *PostError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, ErrNoResources)
	require.GreaterOrEqual(t, pe.Index, srq.MaxWR())
}

func TestEvents(t *testing.T) {
	// With one P, the send below can only run if the waiter's blocking cgo
	// call released it.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, b := newPair(t, pairCfg{twoDevices: true, b: sideCfg{events: true}})
	require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(1, b.mr.SGE(0, 64)), recvWR(2, b.mr.SGE(0, 64))}))
	ctx, cancel := contextTimeout()
	defer cancel()
	got := make(chan []Completion, 1)
	go func() {
		wcs := make([]Completion, 4)
		n, err := b.rcq.Wait(ctx, wcs)
		if err != nil {
			got <- nil
			return
		}
		got <- wcs[:n]
	}()
	time.Sleep(20 * time.Millisecond) // let the waiter block in C
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, a.mr.SGE(0, 64))}))
	wcs := <-got
	require.Len(t, wcs, 1)
	require.Equal(t, uint64(1), wcs[0].WRID)

	// The channel fd turns readable on an armed event.
	fd, err := b.rcq.FD()
	require.NoError(t, err)
	require.GreaterOrEqual(t, fd, 0)
	require.NoError(t, b.rcq.Arm(false))
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(2, OpSend, Signaled, a.mr.SGE(0, 64))}))
	require.True(t, fdReadable(t, fd, testTimeout))
	require.NoError(t, b.rcq.WaitEvent(ctx))
	require.Equal(t, uint64(2), waitN(t, b.rcq, 1)[0].WRID)
	waitN(t, a.scq, 2)

	// Solicited-only arming ignores ordinary sends.
	require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(3, b.mr.SGE(0, 64)), recvWR(4, b.mr.SGE(0, 64))}))
	require.NoError(t, b.rcq.Arm(true))
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(3, OpSend, Signaled, a.mr.SGE(0, 8))}))
	require.False(t, fdReadable(t, fd, 20*time.Millisecond))
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(4, OpSend, Signaled|Solicited, a.mr.SGE(0, 8))}))
	require.True(t, fdReadable(t, fd, testTimeout))
	require.NoError(t, b.rcq.WaitEvent(ctx))
	require.Len(t, waitN(t, b.rcq, 2), 2)
	waitN(t, a.scq, 2)

	// Wait honours cancellation.
	cctx, ccancel := contextTimeout()
	ccancel()
	_, err = b.rcq.Wait(cctx, make([]Completion, 1))
	require.Error(t, err)
}

func TestCounters(t *testing.T) {
	a, b := newPair(t, pairCfg{twoDevices: true})
	remote := a.peer.Buffers[0]
	require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(1, b.mr.SGE(0, 4096)), recvWR(2, b.mr.SGE(0, 4096))}))
	w := sendWR(2, OpRDMAWrite, Signaled, a.mr.SGE(0, 1000))
	w.RemoteAddr, w.RKey = remote.Addr, remote.RKey
	r := sendWR(3, OpRDMARead, Signaled, a.mr.SGE(0, 500))
	r.RemoteAddr, r.RKey = remote.Addr, remote.RKey
	wi := w
	wi.Opcode, wi.WRID = OpRDMAWriteWithImm, 4
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, a.mr.SGE(0, 100)), w, r, wi}))
	waitN(t, a.scq, 4)
	waitN(t, b.rcq, 2)
	ca, err := a.qp.Counters()
	require.NoError(t, err)
	cb, err := b.qp.Counters()
	require.NoError(t, err)
	for _, op := range []Opcode{OpSend, OpRDMAWrite, OpRDMARead, OpRDMAWriteWithImm} {
		require.Equal(t, uint64(1), ca.Posted[op], op)
	}
	require.Equal(t, uint64(4), ca.Completions)
	require.Equal(t, uint64(2600), ca.BytesOut)
	require.Equal(t, uint64(2), cb.RecvPosted)
	require.Equal(t, uint64(2), cb.Completions)
	require.Equal(t, uint64(1), cb.Inbound[OpSend])
	require.Equal(t, uint64(1), cb.Inbound[OpRDMAWriteWithImm])
	if a.dev.Provider() == ProviderSHM {
		// One-sided inbound operations are visible to software only on shm.
		require.Equal(t, uint64(1), cb.Inbound[OpRDMAWrite])
		require.Equal(t, uint64(1), cb.Inbound[OpRDMARead])
		require.Equal(t, uint64(2100), cb.BytesIn)
	}
	dc, err := a.dev.Counters()
	require.NoError(t, err)
	require.Equal(t, ca.Posted, dc.Posted)
}
