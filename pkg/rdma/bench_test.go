package rdma

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkCgoCrossing is the cost of one Go→C call that does nothing.
func BenchmarkCgoCrossing(b *testing.B) {
	x := 0
	for b.Loop() {
		x = cNop(x)
	}
	_ = x
}

// BenchmarkPollEmpty is one crossing plus an empty C poll: the per-batch
// overhead of handing completions to Go.
func BenchmarkPollEmpty(b *testing.B) {
	d := openTest(b)
	cq, err := d.CreateCQ(64)
	require.NoError(b, err)
	defer func() { require.NoError(b, cq.Close()) }()
	wcs := make([]Completion, 32)
	for b.Loop() {
		_, _ = cq.Poll(wcs)
	}
}

var benchSizes = []int{64, 4096, 128 << 10}
var benchOps = []Opcode{OpSend, OpRDMAWrite, OpRDMAWriteWithImm, OpRDMARead}

func benchPair(b *testing.B) (*side, *side) {
	return newPair(b, pairCfg{twoDevices: true,
		a: sideCfg{maxSend: 256, cqDepth: 1024, bufSize: 1 << 20, maxInline: 64},
		b: sideCfg{maxRecv: 256, cqDepth: 1024, bufSize: 1 << 20}})
}

func spinOne(b *testing.B, cq *CQ, wc []Completion) {
	deadline := time.Now().Add(testTimeout)
	for {
		n, err := cq.PollSpin(wc[:1], time.Millisecond)
		if err != nil || (n == 1 && wc[0].Status != StatusOK) {
			b.Fatalf("poll: %v %v", err, wc[0].Err())
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("timeout")
		}
	}
}

// BenchmarkLatency: one signaled operation at a time, posted and completed
// (for two-sided operations the receive is completed and reposted too).
func BenchmarkLatency(b *testing.B) {
	for _, op := range benchOps {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%v/%d", op, n), func(b *testing.B) {
				a, p := benchPair(b)
				r := a.peer.Buffers[0]
				two := op == OpSend || op == OpRDMAWriteWithImm
				recv := []RecvWR{recvWR(1, p.mr.SGE(0, p.mr.Len()))}
				if two {
					require.NoError(b, p.qp.PostRecv(recv))
				}
				w := []SendWR{sendWR(1, op, Signaled, a.mr.SGE(0, n))}
				w[0].RemoteAddr, w[0].RKey = r.Addr, r.RKey
				wc := make([]Completion, 4)
				b.SetBytes(int64(n))
				for b.Loop() {
					if err := a.qp.PostSend(w); err != nil {
						b.Fatal(err)
					}
					spinOne(b, a.scq, wc)
					if two {
						spinOne(b, p.rcq, wc)
						if err := p.qp.PostRecv(recv); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkThroughput: chains of 32 operations, one signaled, with up to 128
// outstanding; receives are reposted in batches.
func BenchmarkThroughput(b *testing.B) {
	const chain, window = 32, 128
	for _, op := range benchOps {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%v/%d", op, n), func(b *testing.B) {
				a, p := benchPair(b)
				r := a.peer.Buffers[0]
				two := op == OpSend || op == OpRDMAWriteWithImm
				recvs := make([]RecvWR, window)
				for i := range recvs {
					recvs[i] = recvWR(uint64(i), p.mr.SGE(0, p.mr.Len()))
				}
				if two {
					require.NoError(b, p.qp.PostRecv(recvs[:window]))
				}
				wrs := make([]SendWR, chain)
				for i := range wrs {
					wrs[i] = sendWR(uint64(i), op, 0, a.mr.SGE(0, n))
					wrs[i].RemoteAddr, wrs[i].RKey = r.Addr, r.RKey
				}
				wrs[chain-1].Flags = Signaled
				wc := make([]Completion, 64)
				outstanding := 0
				b.SetBytes(int64(n) * chain)
				for b.Loop() {
					for outstanding+chain > window {
						k, err := a.scq.PollSpin(wc, time.Millisecond)
						if err != nil {
							b.Fatal(err)
						}
						outstanding -= k * chain
					}
					if err := a.qp.PostSend(wrs); err != nil {
						b.Fatal(err)
					}
					outstanding += chain
					if two {
						got := 0
						for got < chain {
							k, err := p.rcq.PollSpin(wc[:chain-got], time.Millisecond)
							if err != nil {
								b.Fatal(err)
							}
							got += k
						}
						if err := p.qp.PostRecv(recvs[:chain]); err != nil {
							b.Fatal(err)
						}
					}
				}
				for outstanding > 0 {
					k, err := a.scq.PollSpin(wc, time.Millisecond)
					if err != nil {
						b.Fatal(err)
					}
					outstanding -= k * chain
				}
			})
		}
	}
}
