package rdma

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
)

// The peer process is this test binary re-executed with these variables.
const (
	envPeerRole = "HATRPC_RDMA_TEST_PEER"
	envPeerAddr = "HATRPC_RDMA_TEST_ADDR"
	quitImm     = 0xdead
)

// runPeer is the child side: it dials the parent, bootstraps one QP and
// plays its role. Exit code 0 is success.
func runPeer(role string) int {
	if err := peerMain(role); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 1
	}
	return 0
}

func peerMain(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	conn, err := net.Dial("tcp", os.Getenv(envPeerAddr))
	if err != nil {
		return err
	}
	defer conn.Close()
	d, err := Open(WithShmSize(64 << 20))
	if err != nil {
		return err
	}
	defer d.Close()
	pd, err := d.AllocPD()
	if err != nil {
		return err
	}
	defer pd.Close()
	scq, err := d.CreateCQ(64)
	if err != nil {
		return err
	}
	defer scq.Close()
	rcq, err := d.CreateCQ(64)
	if err != nil {
		return err
	}
	defer rcq.Close()
	qp, err := pd.CreateQP(QPConfig{SendCQ: scq, RecvCQ: rcq, MaxSendWR: 32, MaxRecvWR: 32, MaxSGE: 1, RNRRetry: 7})
	if err != nil {
		return err
	}
	defer qp.Close()
	mr, err := pd.AllocMR(256<<10, AccessAll)
	if err != nil {
		return err
	}
	defer mr.Close()
	const slot = 4096
	if role == "echo" {
		recvs := make([]RecvWR, 16)
		for i := range recvs {
			recvs[i] = recvWR(uint64(i), mr.SGE(i*slot, slot))
		}
		if err := qp.PostRecv(recvs); err != nil {
			return err
		}
	}
	if _, err := qp.Bootstrap(ctx, conn, mr.Remote()); err != nil {
		return err
	}
	switch role {
	case "idle":
		// Sit until killed (or the parent hangs up).
		var b [1]byte
		_, _ = conn.Read(b[:])
		return nil
	case "echo":
		wcs := make([]Completion, 16)
		for ctx.Err() == nil {
			n, err := rcq.PollSpin(wcs, 10*time.Millisecond)
			if err != nil {
				return err
			}
			for _, wc := range wcs[:n] {
				if err := wc.Err(); err != nil {
					return err
				}
				off := int(wc.WRID) * slot
				if wc.Imm == quitImm {
					return nil
				}
				// Reply from a second area so the receive slot can be reposted.
				out := 128<<10 + off
				copy(mr.Bytes()[out:out+int(wc.ByteLen)], mr.Bytes()[off:off+int(wc.ByteLen)])
				if err := qp.PostRecv([]RecvWR{recvWR(wc.WRID, mr.SGE(off, slot))}); err != nil {
					return err
				}
				reply := sendWR(wc.WRID, OpSendWithImm, Signaled, mr.SGE(out, int(wc.ByteLen)))
				reply.Imm = wc.Imm + 1
				if err := qp.PostSend([]SendWR{reply}); err != nil {
					return err
				}
				sc := make([]Completion, 1)
				for k := 0; k == 0; {
					if k, err = scq.PollSpin(sc, time.Second); err != nil {
						return err
					}
					if ctx.Err() != nil {
						return ctx.Err()
					}
				}
				if err := sc[0].Err(); err != nil {
					return err
				}
			}
		}
		return ctx.Err()
	}
	return fmt.Errorf("unknown role %q", role)
}

// startPeer launches the peer process and bootstraps a with it.
func startPeer(t testing.TB, role string, a *side) *exec.Cmd {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPeerRole+"="+role, envPeerAddr+"="+ln.Addr().String())
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ctx, cancel := contextTimeout()
	defer cancel()
	require.NoError(t, ln.(*net.TCPListener).SetDeadline(time.Now().Add(testTimeout)))
	conn, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	a.peer, err = a.qp.Bootstrap(ctx, conn, a.mr.Remote())
	require.NoError(t, err)
	require.Len(t, a.peer.Buffers, 1)
	return cmd
}

func TestCrossProcess(t *testing.T) {
	d := openTest(t)
	a := newSide(t, d, newPD(t, d), sideCfg{rnrRetry: 7})
	cmd := startPeer(t, "echo", a)
	remote := a.peer.Buffers[0]

	t.Run("send-recv", func(t *testing.T) {
		for i := 0; i < 200; i++ {
			n := []int{1, 64, 4096}[i%3]
			require.NoError(t, a.qp.PostRecv([]RecvWR{recvWR(uint64(i), a.mr.SGE(64<<10, 4096))}))
			fill(a.mr.Bytes()[:n], byte(i))
			w := sendWR(uint64(i), OpSendWithImm, Signaled, a.mr.SGE(0, n))
			w.Imm = uint32(i)
			require.NoError(t, a.qp.PostSend([]SendWR{w}))
			require.NoError(t, waitN(t, a.scq, 1)[0].Err())
			rc := waitN(t, a.rcq, 1)[0]
			require.NoError(t, rc.Err())
			require.Equal(t, uint32(n), rc.ByteLen)
			require.Equal(t, uint32(i+1), rc.Imm)
			require.Equal(t, a.mr.Bytes()[:n], a.mr.Bytes()[64<<10:64<<10+n])
		}
	})
	t.Run("write-read-atomic", func(t *testing.T) {
		fill(a.mr.Bytes()[:8192], 42)
		w := sendWR(1, OpRDMAWrite, 0, a.mr.SGE(0, 8192))
		w.RemoteAddr, w.RKey = remote.Addr+200<<10, remote.RKey
		r := sendWR(2, OpRDMARead, Signaled, a.mr.SGE(100<<10, 8192))
		r.RemoteAddr, r.RKey = remote.Addr+200<<10, remote.RKey
		require.NoError(t, a.qp.PostSend([]SendWR{w, r}))
		require.NoError(t, waitN(t, a.scq, 1)[0].Err())
		require.Equal(t, a.mr.Bytes()[:8192], a.mr.Bytes()[100<<10:100<<10+8192])
		for i := 0; i < 3; i++ {
			f := sendWR(3, OpAtomicFetchAndAdd, Signaled, a.mr.SGE(120<<10, 8))
			f.RemoteAddr, f.RKey, f.CompareAdd = remote.Addr+250<<10, remote.RKey, 10
			require.NoError(t, a.qp.PostSend([]SendWR{f}))
			require.NoError(t, waitN(t, a.scq, 1)[0].Err())
			require.Equal(t, uint64(10*i), binary.LittleEndian.Uint64(a.mr.Bytes()[120<<10:]))
		}
	})
	// Ask the peer to quit and check it exited cleanly.
	quit := sendWR(9, OpSendWithImm, Signaled, a.mr.SGE(0, 1))
	quit.Imm = quitImm
	require.NoError(t, a.qp.PostSend([]SendWR{quit}))
	require.NoError(t, waitN(t, a.scq, 1)[0].Err())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(testTimeout):
		t.Fatal("peer did not exit")
	}
}

// A dead peer process is detected: a send waiting on RNR and everything
// behind it fail instead of hanging (waitN's hang guard is the bound; shm
// learns of the death from a pidfd, ibv from its retry budget, and neither
// is a speed this test may assert on a loaded host).
func TestDeadPeer(t *testing.T) {
	d := openTest(t)
	a := newSide(t, d, newPD(t, d), sideCfg{rnrRetry: 7})
	cmd := startPeer(t, "idle", a)
	remote := a.peer.Buffers[0]
	// The idle peer posted no receive: this SEND waits in RNR retries.
	w := sendWR(2, OpRDMAWrite, Signaled, a.mr.SGE(0, 64))
	w.RemoteAddr, w.RKey = remote.Addr, remote.RKey
	require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, a.mr.SGE(0, 64)), w}))
	expectNone(t, a.scq, 5*time.Millisecond)
	require.NoError(t, cmd.Process.Kill())
	wcs := waitN(t, a.scq, 2)
	require.ErrorIs(t, wcs[0].Err(), ErrRetryExceeded)
	require.ErrorIs(t, wcs[1].Err(), ErrFlushed)
	require.Equal(t, QPError, a.qp.State())
}

// BenchmarkCrossProcessSendRecv is the Go-level round trip to an echo peer
// process: post, busy-poll both CQs in C, repost (4 crossings per RTT).
func BenchmarkCrossProcessSendRecv(b *testing.B) {
	for _, n := range []int{64, 4096} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d := openTest(b)
			a := newSide(b, d, newPD(b, d), sideCfg{rnrRetry: 7})
			startPeer(b, "echo", a)
			recv := []RecvWR{recvWR(1, a.mr.SGE(64<<10, 4096))}
			w := []SendWR{sendWR(1, OpSend, Signaled, a.mr.SGE(0, n))}
			wc := make([]Completion, 2)
			// The mean is dominated by preemptions on a shared machine; the
			// per-round-trip median is reported alongside.
			samples := make([]time.Duration, 0, 1<<16)
			for b.Loop() {
				t0 := time.Now()
				if err := a.qp.PostRecv(recv); err != nil {
					b.Fatal(err)
				}
				if err := a.qp.PostSend(w); err != nil {
					b.Fatal(err)
				}
				spinOne(b, a.scq, wc)
				spinOne(b, a.rcq, wc)
				if len(samples) < cap(samples) {
					samples = append(samples, time.Since(t0))
				}
			}
			slices.Sort(samples)
			if len(samples) > 0 {
				b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(samples[len(samples)*9/10].Nanoseconds()), "p90-ns")
			}
			quit := sendWR(9, OpSendWithImm, Signaled, a.mr.SGE(0, 1))
			quit.Imm = quitImm
			if err := a.qp.PostSend([]SendWR{quit}); err != nil {
				b.Fatal(err)
			}
			spinOne(b, a.scq, wc)
		})
	}
}
