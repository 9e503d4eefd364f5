package rdma

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Remote access violations fail with a remote access error completion, the
// QP enters the error state and later work is flushed.
func TestRemoteAccessErrors(t *testing.T) {
	tests := []struct {
		name   string
		access Access
		op     Opcode
		mod    func(w *SendWR, r RemoteBuffer)
	}{
		{"bad-rkey", AccessAll, OpRDMAWrite, func(w *SendWR, r RemoteBuffer) { w.RKey = r.RKey ^ 0x5a5a000 }},
		{"past-end", AccessAll, OpRDMAWrite, func(w *SendWR, r RemoteBuffer) { w.RemoteAddr = r.Addr + r.Len - 10 }},
		{"before-start", AccessAll, OpRDMARead, func(w *SendWR, r RemoteBuffer) { w.RemoteAddr = r.Addr - 64 }},
		{"read-not-allowed", LocalWrite | RemoteWrite, OpRDMARead, func(*SendWR, RemoteBuffer) {}},
		{"write-not-allowed", RemoteRead, OpRDMAWrite, func(*SendWR, RemoteBuffer) {}},
		{"atomic-not-allowed", LocalWrite | RemoteWrite | RemoteRead, OpAtomicFetchAndAdd, func(*SendWR, RemoteBuffer) {}},
		{"write-imm-bad-rkey", AccessAll, OpRDMAWriteWithImm, func(w *SendWR, r RemoteBuffer) { w.RKey = 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newPair(t, pairCfg{b: sideCfg{access: tc.access}})
			require.NoError(t, a.qp.PostRecv([]RecvWR{recvWR(50, a.mr.SGE(0, 64))}))
			consumesRecv := tc.op == OpRDMAWriteWithImm
			if consumesRecv {
				// Without a receive the responder may answer RNR before it
				// looks at the rkey (rxe does): the rkey is what is tested.
				require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(60, b.mr.SGE(0, 64))}))
			}
			n := 64
			if tc.op >= OpAtomicFetchAndAdd {
				n = 8
			}
			r := a.peer.Buffers[0]
			w := sendWR(1, tc.op, Signaled, a.mr.SGE(0, n))
			w.RemoteAddr, w.RKey = r.Addr, r.RKey
			tc.mod(&w, r)
			next := sendWR(2, OpRDMAWrite, 0, a.mr.SGE(0, n)) // unsignaled, still flushed
			next.RemoteAddr, next.RKey = r.Addr, r.RKey
			require.NoError(t, a.qp.PostSend([]SendWR{w, next}))
			wcs := waitN(t, a.scq, 2)
			require.ErrorIs(t, wcs[0].Err(), ErrRemoteAccess)
			require.Equal(t, uint64(1), wcs[0].WRID)
			require.ErrorIs(t, wcs[1].Err(), ErrFlushed)
			require.Equal(t, QPError, a.qp.State())
			// Posted receives flush too, and so does new work.
			rc := waitN(t, a.rcq, 1)[0]
			require.ErrorIs(t, rc.Err(), ErrFlushed)
			require.Equal(t, uint64(50), rc.WRID)
			require.NoError(t, a.qp.PostSend([]SendWR{sendWR(3, OpSend, 0, a.mr.SGE(0, 1))}))
			require.ErrorIs(t, waitN(t, a.scq, 1)[0].Err(), ErrFlushed)
			if consumesRecv {
				// Nothing was delivered. Whether the responder also fails
				// its QP (and so completes the receive in error) differs
				// between devices: any completion must be an error.
				expectNoSuccess(t, b.rcq, time.Millisecond)
			} else {
				expectNone(t, b.rcq, time.Millisecond)
			}
			c, err := a.qp.Counters()
			require.NoError(t, err)
			require.Equal(t, uint64(4), c.Errors)
			_ = b
		})
	}
}

func TestLocalProtection(t *testing.T) {
	a, b := newPair(t, pairCfg{})
	bad := a.mr.SGE(0, 64)
	bad.LKey ^= 0x7000
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, bad)}))
	// The IB spec says local protection; rxe reports a local QP operation
	// error for an lkey it cannot find. Both fail the QP.
	requireErrorIsOneOf(t, waitN(t, a.scq, 1)[0].Err(), ErrLocalProt, ErrLocalOp)
	require.Equal(t, QPError, a.qp.State())
	_ = b
}

// No receive posted: RNR retries, then RNR-retry-exceeded; with infinite
// retries a late receive lets the send through.
func TestRNR(t *testing.T) {
	t.Run("exceeded", func(t *testing.T) {
		a, _ := newPair(t, pairCfg{a: sideCfg{rnrRetry: 2}})
		require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, a.mr.SGE(0, 8)),
			sendWR(2, OpSend, Signaled, a.mr.SGE(0, 8))}))
		wcs := waitN(t, a.scq, 2)
		require.ErrorIs(t, wcs[0].Err(), ErrRNRRetry)
		require.ErrorIs(t, wcs[1].Err(), ErrFlushed)
		require.Equal(t, QPError, a.qp.State())
	})
	t.Run("zero-retries", func(t *testing.T) {
		a, _ := newPair(t, pairCfg{a: sideCfg{rnrRetry: 0}})
		require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSendWithImm, Signaled, a.mr.SGE(0, 8))}))
		require.ErrorIs(t, waitN(t, a.scq, 1)[0].Err(), ErrRNRRetry)
	})
	t.Run("late-receive", func(t *testing.T) {
		a, b := newPair(t, pairCfg{twoDevices: true, a: sideCfg{rnrRetry: 7}})
		r := a.peer.Buffers[0]
		wi := sendWR(1, OpRDMAWriteWithImm, Signaled, a.mr.SGE(0, 8))
		wi.RemoteAddr, wi.RKey = r.Addr, r.RKey
		w := sendWR(2, OpRDMAWrite, Signaled, a.mr.SGE(0, 8))
		w.RemoteAddr, w.RKey = r.Addr, r.RKey
		require.NoError(t, a.qp.PostSend([]SendWR{wi, w}))
		// The WRITE behind the blocked WRITE_WITH_IMM waits too (RC order).
		expectNone(t, a.scq, 10*time.Millisecond)
		require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(9, b.mr.SGE(0, 8))}))
		wcs := waitN(t, a.scq, 2)
		require.NoError(t, wcs[0].Err())
		require.NoError(t, wcs[1].Err())
		require.Equal(t, uint64(9), waitN(t, b.rcq, 1)[0].WRID)
	})
}

func TestRecvTooSmall(t *testing.T) {
	a, b := newPair(t, pairCfg{b: sideCfg{}})
	require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(1, b.mr.SGE(0, 16)), recvWR(2, b.mr.SGE(0, 16))}))
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, a.mr.SGE(0, 64))}))
	// The responder NAKs the SEND; devices differ in which NAK (invalid
	// request on most, remote operation error on rxe).
	requireErrorIsOneOf(t, waitN(t, a.scq, 1)[0].Err(), ErrRemoteInvalid, ErrRemoteOp)
	rc := waitN(t, b.rcq, 2)
	// Local length error per the spec; rxe says local QP operation error.
	requireErrorIsOneOf(t, rc[0].Err(), ErrLocalLen, ErrLocalOp)
	require.ErrorIs(t, rc[1].Err(), ErrFlushed)
	require.Equal(t, QPError, b.qp.State())
	require.Equal(t, QPError, a.qp.State())
}

func TestSetErrorFlushes(t *testing.T) {
	a, b := newPair(t, pairCfg{})
	require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(1, b.mr.SGE(0, 16)), recvWR(2, b.mr.SGE(0, 16))}))
	require.NoError(t, b.qp.SetError())
	require.Equal(t, QPError, b.qp.State())
	wcs := waitN(t, b.rcq, 2)
	for _, wc := range wcs {
		require.ErrorIs(t, wc.Err(), ErrFlushed)
	}
	require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(3, b.mr.SGE(0, 16))}))
	require.ErrorIs(t, waitN(t, b.rcq, 1)[0].Err(), ErrFlushed)
	// The peer of a failed QP gets no answer: transport retry exceeded.
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, a.mr.SGE(0, 8))}))
	require.ErrorIs(t, waitN(t, a.scq, 1)[0].Err(), ErrRetryExceeded)
}

func TestDeregisteredMemory(t *testing.T) {
	a, b := newPair(t, pairCfg{twoDevices: true})
	extra, err := b.pd.AllocMR(4096, AccessAll)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, extra.Close()) })
	r := extra.Remote()
	w := sendWR(1, OpRDMAWrite, Signaled, a.mr.SGE(0, 64))
	w.RemoteAddr, w.RKey = r.Addr, r.RKey
	require.NoError(t, a.qp.PostSend([]SendWR{w}))
	require.NoError(t, waitN(t, a.scq, 1)[0].Err())
	require.NoError(t, extra.Deregister())
	w.WRID = 2
	require.NoError(t, a.qp.PostSend([]SendWR{w}))
	require.ErrorIs(t, waitN(t, a.scq, 1)[0].Err(), ErrRemoteAccess)
}

func TestCQOverflow(t *testing.T) {
	a, _ := newPair(t, pairCfg{a: sideCfg{cqDepth: 4, maxSend: 64}})
	r := a.peer.Buffers[0]
	depth := a.scq.Depth()
	require.GreaterOrEqual(t, depth, 4)
	require.Less(t, depth, 60)
	wrs := make([]SendWR, depth+4)
	for i := range wrs {
		wrs[i] = sendWR(uint64(i), OpRDMAWrite, Signaled, a.mr.SGE(0, 8))
		wrs[i].RemoteAddr, wrs[i].RKey = r.Addr, r.RKey
	}
	require.NoError(t, a.qp.PostSend(wrs))
	buf := make([]Completion, 16)
	deadline := time.Now().Add(testTimeout)
	var err error
	for err == nil && time.Now().Before(deadline) {
		_, err = a.scq.Poll(buf)
	}
	require.ErrorIs(t, err, ErrCQOverflow)
	require.Equal(t, QPError, a.qp.State())
}

func TestBadArguments(t *testing.T) {
	d := openTest(t)
	pd := newPD(t, d)
	_, err := d.CreateCQ(0)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = pd.AllocMR(0, AccessAll)
	require.ErrorIs(t, err, ErrInvalid)
	cq, err := d.CreateCQ(8)
	require.NoError(t, err)
	defer func() { require.NoError(t, cq.Close()) }()
	_, err = pd.CreateQP(QPConfig{SendCQ: cq, RecvCQ: cq, MaxSendWR: 0, MaxRecvWR: 1})
	require.ErrorIs(t, err, ErrInvalid)
	qp, err := pd.CreateQP(QPConfig{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	// A CQ in use cannot be destroyed; a QP not connected cannot send.
	require.ErrorIs(t, cq.Close(), ErrBadState)
	mr, err := pd.AllocMR(64, AccessAll)
	require.NoError(t, err)
	require.ErrorIs(t, qp.PostSend([]SendWR{sendWR(1, OpSend, 0, mr.SGE(0, 8))}), ErrBadState)
	require.NoError(t, mr.Close())
	require.ErrorIs(t, mr.Close(), ErrClosed)
	require.NoError(t, qp.Close())
	require.ErrorIs(t, qp.Close(), ErrClosed)
	require.ErrorIs(t, qp.PostSend(nil), ErrClosed)
	var e *Error
	require.ErrorAs(t, qp.Connect(Endpoint{Provider: "nope"}), &e)
	_, err = Open(WithProvider("bogus"))
	require.ErrorIs(t, err, ErrInvalid)
}

// With no RDMA device the ibv provider reports it clearly; auto falls back.
func TestIBVNoDevice(t *testing.T) {
	ents, _ := os.ReadDir("/sys/class/infiniband")
	d, err := Open(WithProvider(ProviderIBV))
	if len(ents) == 0 {
		require.ErrorIs(t, err, ErrNoDevice)
		require.Contains(t, err.Error(), "no RDMA device")
		var e *Error
		require.True(t, errors.As(err, &e))
		require.Equal(t, StatusNoDevice, e.Status)
		auto, err := Open(WithProvider(ProviderAuto), WithShmSize(16<<20))
		require.NoError(t, err)
		require.Equal(t, ProviderSHM, auto.Provider())
		require.NoError(t, auto.Close())
		return
	}
	require.NoError(t, err)
	info, err := d.Info()
	require.NoError(t, err)
	require.NotEmpty(t, info.Name)
	require.NoError(t, d.Close())
}

// A destroyed target QP never answers: retry exceeded, then flush.
func TestPeerQPDestroyed(t *testing.T) {
	a, b := newPair(t, pairCfg{twoDevices: true})
	require.NoError(t, b.qp.Close())
	r := a.peer.Buffers[0]
	w := sendWR(1, OpRDMAWrite, Signaled, a.mr.SGE(0, 8))
	w.RemoteAddr, w.RKey = r.Addr, r.RKey
	require.NoError(t, a.qp.PostSend([]SendWR{w, sendWR(2, OpSend, Signaled, a.mr.SGE(0, 8))}))
	wcs := waitN(t, a.scq, 2)
	require.ErrorIs(t, wcs[0].Err(), ErrRetryExceeded)
	require.ErrorIs(t, wcs[1].Err(), ErrFlushed)
}

// Once Deregister returns, no write lands in the region, even with writes
// streaming at it from another goroutine.
func TestDeregisterUnderLoad(t *testing.T) {
	a, b := newPair(t, pairCfg{twoDevices: true, a: sideCfg{maxSend: 64, cqDepth: 1024}})
	target, err := b.pd.AllocMR(64<<10, AccessAll)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, target.Close()) })
	r := target.Remote()
	fill(a.mr.Bytes()[:64<<10], 9)
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		wrs := make([]SendWR, 8)
		for i := range wrs {
			wrs[i] = sendWR(uint64(i), OpRDMAWrite, 0, a.mr.SGE(0, 64<<10))
			wrs[i].RemoteAddr, wrs[i].RKey = r.Addr, r.RKey
		}
		wrs[7].Flags = Signaled
		wc := make([]Completion, 16)
		deadline := time.Now().Add(testTimeout)
		for i := 0; time.Now().Before(deadline); i++ {
			if i == 4 {
				close(started)
			}
			if err := a.qp.PostSend(wrs); err != nil {
				done <- err
				return
			}
			for got := 0; got == 0; {
				n, err := a.scq.PollSpin(wc, time.Millisecond)
				if err != nil {
					done <- err
					return
				}
				for _, c := range wc[:n] {
					if c.Err() != nil {
						done <- c.Err()
						return
					}
				}
				got = n
			}
		}
		done <- errors.New("writes never failed")
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("writer stopped early: %v", err)
	case <-time.After(testTimeout):
		t.Fatal("writer did not start")
	}
	require.NoError(t, target.Deregister())
	clear(target.Bytes())
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrRemoteAccess)
	case <-time.After(2 * testTimeout):
		t.Fatal("writer did not finish")
	}
	require.Equal(t, make([]byte, 64<<10), target.Bytes())
}
