package rdma

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/test/fdcheck"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// testTimeout guards each call against a hang (a 16 MiB busy-polled call
// took 13 s in the emulated guest on a loaded host): scaled there.
var testTimeout = testenv.HangGuard(10 * time.Second)

// buildRunTimeout only guards against a hung build-and-run of the C suites:
// under emulation (the Soft-RoCE VM) compiling alone takes a minute or more.
const buildRunTimeout = 15 * time.Minute

func TestMain(m *testing.M) {
	if role := os.Getenv(envPeerRole); role != "" {
		os.Exit(runPeer(role))
	}
	if os.Getenv(fdcheck.Env) != "" {
		os.Exit(fdcheck.ChildMain())
	}
	goleak.VerifyTestMain(m)
}

// openTest opens the provider selected by HATRPC_PROVIDER (auto: ibv if a
// device exists, else shm), so the same assertions run on an RDMA node.
func openTest(t testing.TB) *Device {
	t.Helper()
	d, err := Open(WithShmSize(256<<20), WithRNRTimer(20*time.Microsecond), WithPeerCheck(2*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

type sideCfg struct {
	maxSend, maxRecv, maxInline, maxSGE int
	rnrRetry                            int
	cqDepth                             int
	bufSize                             int
	access                              Access
	events                              bool
	srq                                 *SRQ
}

func defaults(c sideCfg) sideCfg {
	if c.maxSend == 0 {
		c.maxSend = 64
	}
	if c.maxRecv == 0 {
		c.maxRecv = 64
	}
	if c.maxSGE == 0 {
		c.maxSGE = MaxSGE
	}
	if c.cqDepth == 0 {
		c.cqDepth = 256
	}
	if c.bufSize == 0 {
		c.bufSize = 256 << 10
	}
	if c.access == 0 {
		c.access = AccessAll
	}
	return c
}

type side struct {
	dev      *Device
	pd       *PD
	scq, rcq *CQ
	qp       *QP
	mr       *MR
	peer     Endpoint
}

// newSide builds PD, CQs, a QP and one buffer; cleanup runs in reverse.
func newSide(t testing.TB, d *Device, pd *PD, c sideCfg) *side {
	t.Helper()
	c = defaults(c)
	s := &side{dev: d, pd: pd}
	var opts []CQOption
	if c.events {
		opts = append(opts, WithEvents())
	}
	var err error
	s.scq, err = d.CreateCQ(c.cqDepth, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.scq.Close()) })
	s.rcq, err = d.CreateCQ(c.cqDepth, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.rcq.Close()) })
	s.qp, err = pd.CreateQP(QPConfig{SendCQ: s.scq, RecvCQ: s.rcq, SRQ: c.srq, MaxSendWR: c.maxSend,
		MaxRecvWR: c.maxRecv, MaxSGE: c.maxSGE, MaxInline: c.maxInline, RNRRetry: c.rnrRetry})
	require.NoError(t, err)
	t.Cleanup(func() { closeOnce(t, s.qp.Close()) })
	s.mr, err = pd.AllocMR(c.bufSize, c.access)
	require.NoError(t, err)
	t.Cleanup(func() { closeOnce(t, s.mr.Close()) })
	return s
}

// closeOnce accepts ErrClosed: a test may close an object early.
func closeOnce(t testing.TB, err error) {
	if !errors.Is(err, ErrClosed) {
		require.NoError(t, err)
	}
}

func newPD(t testing.TB, d *Device) *PD {
	pd, err := d.AllocPD()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pd.Close()) })
	return pd
}

// connect bootstraps a and b over an in-memory connection, exposing each
// side's buffer to the other.
func connect(t testing.TB, a, b *side) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	errc := make(chan error, 1)
	go func() {
		var err error
		b.peer, err = b.qp.Bootstrap(ctx, cb, b.mr.Remote())
		errc <- err
	}()
	var err error
	a.peer, err = a.qp.Bootstrap(ctx, ca, a.mr.Remote())
	require.NoError(t, err)
	require.NoError(t, <-errc)
	require.Equal(t, QPRTS, a.qp.State())
	require.Equal(t, QPRTS, b.qp.State())
}

type pairCfg struct {
	a, b       sideCfg
	twoDevices bool // separate devices (shm: separate segments, mapped via /proc)
}

func newPair(t testing.TB, c pairCfg) (*side, *side) {
	t.Helper()
	d1 := openTest(t)
	d2 := d1
	if c.twoDevices {
		d2 = openTest(t)
	}
	pd1 := newPD(t, d1)
	pd2 := pd1
	if c.twoDevices {
		pd2 = newPD(t, d2)
	}
	a := newSide(t, d1, pd1, c.a)
	b := newSide(t, d2, pd2, c.b)
	connect(t, a, b)
	return a, b
}

// waitN polls until n completions arrived or the timeout hits.
func waitN(t testing.TB, cq *CQ, n int) []Completion {
	t.Helper()
	out := make([]Completion, 0, n)
	buf := make([]Completion, 32)
	deadline := time.Now().Add(testTimeout)
	for len(out) < n {
		require.True(t, time.Now().Before(deadline), "timed out with %d of %d completions", len(out), n)
		k, err := cq.PollSpin(buf[:min(len(buf), n-len(out))], time.Millisecond)
		require.NoError(t, err)
		out = append(out, buf[:k]...)
	}
	return out
}

// expectNone checks no completion shows up for a short while.
func expectNone(t testing.TB, cq *CQ, d time.Duration) {
	t.Helper()
	buf := make([]Completion, 4)
	n, err := cq.PollSpin(buf, d)
	require.NoError(t, err)
	require.Zero(t, n, "unexpected completion %+v", buf[0])
}

// expectNoSuccess checks every completion that shows up for a short while is
// an error.
func expectNoSuccess(t testing.TB, cq *CQ, d time.Duration) {
	t.Helper()
	buf := make([]Completion, 4)
	n, err := cq.PollSpin(buf, d)
	require.NoError(t, err)
	for _, wc := range buf[:n] {
		require.Error(t, wc.Err(), "unexpected successful completion %+v", wc)
	}
}

func recvWR(id uint64, sges ...SGE) RecvWR {
	w := RecvWR{WRID: id, NumSGE: uint32(len(sges))}
	copy(w.SG[:], sges)
	return w
}

func sendWR(id uint64, op Opcode, flags SendFlags, sges ...SGE) SendWR {
	w := SendWR{WRID: id, Opcode: op, Flags: flags, NumSGE: uint32(len(sges))}
	copy(w.SG[:], sges)
	return w
}

// sendCompletionOp is the opcode verbs report on the requester's side:
// SEND_WITH_IMM completes as SEND and RDMA_WRITE_WITH_IMM as RDMA_WRITE
// (ibv_poll_cq(3) has no *_WITH_IMM send completion).
func sendCompletionOp(op Opcode) Opcode {
	switch op {
	case OpSendWithImm:
		return OpSend
	case OpRDMAWriteWithImm:
		return OpRDMAWrite
	}
	return op
}

// requireErrorIsOneOf is for faults where the IB spec lets devices differ in
// the status they report (each use says why).
func requireErrorIsOneOf(t testing.TB, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if errors.Is(err, target) {
			return
		}
	}
	require.Failf(t, "unexpected error", "%v is none of %v", err, targets)
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}
