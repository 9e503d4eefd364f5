package emul

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// pilafReader is a Pilaf client's one-sided side: a QP connected to the
// server's index QP and a local buffer the READs land in.
type pilafReader struct {
	cq      *rdma.CQ
	qp      *rdma.QP
	mr      *rdma.MR
	buckets rdma.RemoteBuffer
	entries rdma.RemoteBuffer
	values  rdma.RemoteBuffer
	nb, ne  uint64
	retries int
	wr      [1]rdma.SendWR
	wc      [4]rdma.Completion
	stats   PilafStats
}

// Local buffer layout: bucket, entry, then the value.
const (
	plBucketOff = 0
	plEntryOff  = bucketSize
	plValueOff  = bucketSize + entrySize
)

func newPilafReader(ctx context.Context, dev *rdma.Device, pd *rdma.PD, nc net.Conn, retries int) (_ *pilafReader, err error) {
	p := &pilafReader{retries: max(retries, 1)}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.cq, err = dev.CreateCQ(8); err != nil {
		return nil, fmt.Errorf("emul: pilaf cq: %w", err)
	}
	if p.qp, err = pd.CreateQP(rdma.QPConfig{SendCQ: p.cq, RecvCQ: p.cq, MaxSendWR: 4, MaxRecvWR: 1, MaxSGE: 1}); err != nil {
		return nil, fmt.Errorf("emul: pilaf qp: %w", err)
	}
	if p.mr, err = pd.AllocMR(plValueOff+maxExtent, rdma.LocalWrite); err != nil {
		return nil, fmt.Errorf("emul: pilaf buffer: %w", err)
	}
	peer, err := p.qp.Bootstrap(ctx, nc)
	if err != nil {
		return nil, fmt.Errorf("emul: pilaf index bootstrap: %w", err)
	}
	b := peer.Buffers
	if len(b) != 4 || b[3].Len != indexMagic || b[3].RKey != indexLayout {
		return nil, fmt.Errorf("%w: server did not describe a pilaf index", ErrProtocol)
	}
	p.buckets, p.entries, p.values = b[0], b[1], b[2]
	p.nb, p.ne = b[3].Addr>>32, b[3].Addr&(1<<32-1)
	if p.nb == 0 || p.buckets.Len < p.nb*bucketSize || p.entries.Len < p.ne*entrySize {
		return nil, fmt.Errorf("%w: pilaf index of %d buckets, %d entries does not fit its regions", ErrProtocol, p.nb, p.ne)
	}
	return p, nil
}

func (p *pilafReader) close() {
	if p.qp != nil {
		_ = p.qp.Close()
	}
	if p.cq != nil {
		_ = p.cq.Close()
	}
	if p.mr != nil {
		_ = p.mr.Close()
	}
}

// read is one signaled RDMA READ of n bytes at off in rb into the local
// buffer at loc, waited for by polling (no server CPU is involved, so
// there is nothing to wait on but our own completion).
func (p *pilafReader) read(ctx, life context.Context, loc int, rb rdma.RemoteBuffer, off uint64, n int) ([]byte, error) {
	if off+uint64(n) > rb.Len {
		return nil, fmt.Errorf("%w: pilaf READ of %d B at %d beyond a %d B region", ErrProtocol, n, off, rb.Len)
	}
	p.stats.Reads++
	wr := &p.wr[0]
	*wr = rdma.SendWR{WRID: p.stats.Reads, Opcode: rdma.OpRDMARead, Flags: rdma.Signaled, NumSGE: 1,
		RemoteAddr: rb.Addr + off, RKey: rb.RKey}
	wr.SG[0] = p.mr.SGE(loc, n)
	if err := p.qp.PostSend(p.wr[:]); err != nil {
		if ctx.Err() == nil && peerGone(life) {
			return nil, fmt.Errorf("%w: pilaf READ: %w", ErrPeerGone, err)
		}
		return nil, fmt.Errorf("emul: pilaf READ: %w", err)
	}
	for {
		k, err := p.cq.PollSpin(p.wc[:], 200*time.Microsecond)
		if err != nil {
			return nil, fmt.Errorf("emul: pilaf poll: %w", err)
		}
		if k > 0 {
			if err := p.wc[0].Err(); err != nil {
				if ctx.Err() == nil && peerGone(life) {
					return nil, fmt.Errorf("%w: pilaf READ: %w", ErrPeerGone, err)
				}
				return nil, fmt.Errorf("emul: pilaf READ: %w", err)
			}
			return p.mr.Bytes()[loc : loc+n], nil
		}
		// The READ is still ours to wait for: on cancellation the QP is
		// moved to error so it completes (flushed) and the buffer is free.
		if ctx.Err() != nil || life.Err() != nil {
			_ = p.qp.SetError()
			if life.Err() != nil {
				return nil, ErrPeerGone
			}
			return nil, ctx.Err()
		}
	}
}

// A GET retries at once a few times (a rewrite takes the server well
// under a microsecond), then pauses, twice as long each time up to
// retryPauseMax: a server preempted mid-rewrite holds the entry torn for
// as long as its thread waits for a CPU, and 64 retries without a pause
// took 25 µs, so on a loaded host a GET of a key being rewritten gave up
// and asked by RPC (TestBenchEmulate, at load 8-17: "63 retries, 1
// answered by RPC", the 64 READs of one GET all finding its entry torn).
// With the pauses, 64 retries wait about 46 ms for the rewrite to end.
const (
	retrySpins    = 8
	retryPauseMax = time.Millisecond
)

// retryPauseFor is how long a GET waits before its attempt-th retry.
func retryPauseFor(attempt int) time.Duration {
	if attempt <= retrySpins {
		return 0
	}
	return min(time.Microsecond<<min(attempt-retrySpins-1, 20), retryPauseMax)
}

// retryPause waits retryPauseFor(attempt), or until ctx or life ends.
func retryPause(ctx, life context.Context, attempt int) error {
	d := retryPauseFor(attempt)
	if d == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-life.Done():
		return ErrPeerGone
	}
}

// get is a GET by three READs: the key's bucket, the entry a matching way
// names, the value the entry names. ok is false when the index does not
// hold the key (or keeps changing under the reader): the caller asks the
// server by RPC, which is authoritative.
func (p *pilafReader) get(ctx, life context.Context, key string, fields []string) (kvstore.Record, bool, error) {
	p.stats.Gets++
	h, tag := keyHash(key)
	boff := (h % p.nb) * bucketSize
retry:
	for attempt := 0; attempt < p.retries; attempt++ {
		if attempt > 0 {
			p.stats.Retries++
			if err := retryPause(ctx, life, attempt); err != nil {
				return nil, false, err
			}
		}
		bk, err := p.read(ctx, life, plBucketOff, p.buckets, boff, bucketSize)
		if err != nil {
			return nil, false, err
		}
		if binary.LittleEndian.Uint64(bk[bucketSumOff:]) != bucketSum(bk) {
			continue
		}
		var ways [bucketWays]uint32
		n := 0
		for w := range bucketWays {
			if binary.LittleEndian.Uint32(bk[w*8:]) == tag {
				ways[n] = binary.LittleEndian.Uint32(bk[w*8+4:])
				n++
			}
		}
		for _, e1 := range ways[:n] {
			if e1 == 0 || uint64(e1) > p.ne {
				continue retry
			}
			eb, err := p.read(ctx, life, plEntryOff, p.entries, uint64(e1-1)*entrySize, entrySize)
			if err != nil {
				return nil, false, err
			}
			if binary.LittleEndian.Uint64(eb[entrySumOff:]) != entrySum(eb) {
				continue retry // torn, or freed since the bucket READ
			}
			kl := int(binary.LittleEndian.Uint16(eb[20:]))
			if kl > entryKeyMax || string(eb[32:32+kl]) != key {
				continue // another key with the same tag
			}
			off, vl := binary.LittleEndian.Uint64(eb[8:]), int(binary.LittleEndian.Uint32(eb[16:]))
			sum := binary.LittleEndian.Uint64(eb[24:])
			if vl == 0 || vl > maxExtent {
				continue retry
			}
			vb, err := p.read(ctx, life, plValueOff, p.values, off, vl)
			if err != nil {
				return nil, false, err
			}
			if xxhash.Sum64(vb) != sum {
				continue retry // the extent was reused: the key was updated
			}
			rec, err := kvstore.DecodeRecord(vb, fields...)
			if err != nil {
				return nil, false, fmt.Errorf("emul: pilaf value of %q: %w", key, err)
			}
			return rec, true, nil
		}
		break // not indexed
	}
	p.stats.Fallbacks++
	return nil, false, nil
}
