package flock

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// A ring MR is ctlLen bytes of control words followed by the ring itself.
// Positions are monotonic byte counts; messages start 64-byte aligned and
// never wrap (a skip message pads to the end instead).
const (
	ctlLen     = 64
	ctlHead    = 0 // owner's consumption position, for a sender's RDMA READ
	ctlMailbox = 8 // target of credit-renewal WRITE_WITH_IMM
)

// Stage MR layout (sender side, leader only): the message being built,
// then a skip message, the head-read target, the mailbox source, then the
// memory-operation scratch slots.
const (
	stageSkip    = 0
	stageHead    = 64
	stageMailbox = 72
	stageBell    = 80 // a server dispatcher's sleep epoch (bell.go)
	stageFixed   = 128
)

// postTimeout bounds how long a leader waits for its own chain to
// complete; shm executes posts synchronously, so this only trips on a
// broken peer.
const postTimeout = 5 * time.Second

func alignUp(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }

func load64(b []byte, off uint64) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off])))
}

func store64(b []byte, off uint64, v uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[off])), v)
}

// ringWriter is the sending end of one QP: it owns the QP's send queue,
// its send CQ and the stage buffer, and is used by the combiner's leader
// only.
type ringWriter struct {
	idx      int
	qp       *rdma.QP
	scq      *rdma.CQ
	stage    *rdma.MR
	sb       []byte // stage bytes (lease)
	msgOff   int    // where messages are built in stage
	maxMsg   int
	remote   rdma.RemoteBuffer // peer's ring MR
	ringSize uint64
	tail     uint64
	peerHead atomic.Uint64 // piggybacked consumption position
	wrs      []rdma.SendWR
	wcs      []rdma.Completion
	wrid     uint64
	done     uint64 // highest work request id known complete (RC: all before it too)
	broken   error
	headRead func() // metric hook
}

func (w *ringWriter) init(stage *rdma.MR, msgOff, maxMsg int, remote rdma.RemoteBuffer) error {
	w.stage, w.sb, w.msgOff, w.maxMsg, w.remote = stage, stage.Bytes(), msgOff, maxMsg, remote
	if remote.Len <= ctlLen || (remote.Len-ctlLen)%msgAlign != 0 {
		return fmt.Errorf("%w: peer ring of %d bytes", ErrProtocol, remote.Len)
	}
	w.ringSize = remote.Len - ctlLen
	if uint64(maxMsg)+msgAlign > w.ringSize {
		return fmt.Errorf("%w: message size %d does not fit peer ring %d", ErrProtocol, maxMsg, w.ringSize)
	}
	w.wcs = make([]rdma.Completion, 16)
	return nil
}

func (w *ringWriter) used() uint64 { return w.tail - w.peerHead.Load() }

// reserve makes room for a message of total bytes, emitting a skip message
// into the chain when it would cross the ring's end, and returns the ring
// offset to write at. It refreshes the peer's head by RDMA READ only when
// the piggybacked value says the ring is full.
func (w *ringWriter) reserve(ctx context.Context, total int) (uint64, error) {
	sz := alignUp(uint64(total), msgAlign)
	var since time.Time
	for spins := 0; ; spins++ {
		off := w.tail % w.ringSize
		need := sz
		if off+sz > w.ringSize {
			need += w.ringSize - off
		}
		if w.used()+need <= w.ringSize {
			if need != sz {
				w.addSkip(off, w.ringSize-off)
				w.tail += w.ringSize - off
				off = 0
			}
			w.tail += sz
			return off, nil
		}
		if err := w.readHead(); err != nil {
			return 0, err
		}
		if w.used()+need <= w.ringSize {
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		// A peer that stops consuming must not hold the leader (and every
		// caller queued behind it) forever.
		if since.IsZero() {
			since = time.Now()
		} else if time.Since(since) > postTimeout {
			w.broken = &QPError{QP: w.idx, Err: fmt.Errorf("%w: peer ring full for %v", ErrProtocol, postTimeout)}
			return 0, w.broken
		}
		if spins > 64 {
			time.Sleep(20 * time.Microsecond)
		} else {
			runtime.Gosched()
		}
	}
}

func (w *ringWriter) readHead() error {
	if w.headRead != nil {
		w.headRead()
	}
	wr := rdma.SendWR{WRID: w.nextID(), Opcode: rdma.OpRDMARead, Flags: rdma.Signaled, NumSGE: 1,
		RemoteAddr: w.remote.Addr + ctlHead, RKey: w.remote.RKey}
	wr.SG[0] = w.stage.SGE(stageHead, 8)
	pending := w.wrs
	w.wrs = []rdma.SendWR{wr}
	err := w.post(context.Background())
	w.wrs = pending
	if err != nil {
		return err
	}
	if h := load64(w.sb, stageHead); h > w.peerHead.Load() {
		w.peerHead.Store(h)
	}
	return nil
}

func (w *ringWriter) nextID() uint64 { w.wrid++; return w.wrid }

// addSkip appends a skip message of n bytes at ring offset off: header,
// then its trailer as a second work request so it lands last.
func (w *ringWriter) addSkip(off, n uint64) {
	can := newCanary()
	b := w.sb[stageSkip : stageSkip+headerLen]
	h := header{flags: flagSkip, canary: can}
	encodeBody(b, h, nil)
	binary.LittleEndian.PutUint32(b, uint32(n))
	binary.LittleEndian.PutUint64(w.sb[stageSkip+headerLen:], can)
	base := w.remote.Addr + ctlLen + off
	hw := rdma.SendWR{WRID: w.nextID(), Opcode: rdma.OpRDMAWrite, NumSGE: 1, RemoteAddr: base, RKey: w.remote.RKey}
	hw.SG[0] = w.stage.SGE(stageSkip, headerLen)
	tw := rdma.SendWR{WRID: w.nextID(), Opcode: rdma.OpRDMAWrite, NumSGE: 1, RemoteAddr: base + n - trailerLen,
		RKey: w.remote.RKey}
	tw.SG[0] = w.stage.SGE(stageSkip+headerLen, trailerLen)
	w.wrs = append(w.wrs, hw, tw)
}

func newCanary() uint64 {
	for {
		if c := rand.Uint64(); c != 0 {
			return c
		}
	}
}

// addMessage encodes a message into the stage buffer and appends the one
// WRITE that carries it: body and trailer as two scatter entries, so the
// trailer is copied after everything else.
func (w *ringWriter) addMessage(ctx context.Context, h header, es []entry) error {
	total := messageLen(es)
	if total > w.maxMsg {
		return ErrTooLarge
	}
	off, err := w.reserve(ctx, total)
	if err != nil {
		return err
	}
	h.canary = newCanary()
	body := encodeBody(w.sb[w.msgOff:], h, es)
	binary.LittleEndian.PutUint64(w.sb[w.msgOff+body:], h.canary)
	wr := rdma.SendWR{WRID: w.nextID(), Opcode: rdma.OpRDMAWrite, NumSGE: 2,
		RemoteAddr: w.remote.Addr + ctlLen + off, RKey: w.remote.RKey}
	wr.SG[0] = w.stage.SGE(w.msgOff, body)
	wr.SG[1] = w.stage.SGE(w.msgOff+body, trailerLen)
	w.wrs = append(w.wrs, wr)
	return nil
}

// post sends the accumulated chain in one crossing with only the last work
// request signaled, and polls until it completes. Any error breaks the QP
// (RC moves it to the error state), so the writer is poisoned.
func (w *ringWriter) post(ctx context.Context) error {
	if w.broken != nil {
		w.wrs = w.wrs[:0] // never to be sent: do not let them pile up
		return w.broken
	}
	if len(w.wrs) == 0 {
		return nil
	}
	lastID, err := w.postAsync()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(postTimeout)
	for {
		n, err := w.scq.PollSpin(w.wcs, 20*time.Microsecond)
		if err != nil {
			w.broken = &QPError{QP: w.idx, Err: err}
			return w.broken
		}
		if err := w.completed(n); err != nil {
			return err
		}
		if w.done >= lastID {
			return nil
		}
		if n == 0 && time.Now().After(deadline) {
			w.broken = &QPError{QP: w.idx, Err: rdma.ErrTimedOut}
			return w.broken
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
}

// postAsync posts the accumulated chain with only the last work request
// signaled and returns its id without waiting: for a poster that must not
// wait on a peer that may be dead (the server's dispatcher). Whoever polls
// the send CQ next (post, reap) records the completion in done.
func (w *ringWriter) postAsync() (uint64, error) {
	if w.broken != nil {
		w.wrs = w.wrs[:0]
		return 0, w.broken
	}
	if len(w.wrs) == 0 {
		return w.done, nil
	}
	last := &w.wrs[len(w.wrs)-1]
	last.Flags |= rdma.Signaled
	lastID := last.WRID
	err := w.qp.PostSend(w.wrs)
	w.wrs = w.wrs[:0]
	if err != nil {
		w.broken = &QPError{QP: w.idx, Err: err}
		return 0, w.broken
	}
	return lastID, nil
}

// reap polls the send CQ once without waiting and records what completed.
func (w *ringWriter) reap() error {
	if w.broken != nil {
		return w.broken
	}
	n, err := w.scq.Poll(w.wcs)
	if err != nil {
		w.broken = &QPError{QP: w.idx, Err: err}
		return w.broken
	}
	return w.completed(n)
}

// completed records n polled completions: a failed one breaks the writer.
func (w *ringWriter) completed(n int) error {
	for i := range w.wcs[:n] {
		wc := &w.wcs[i]
		if err := wc.Err(); err != nil {
			w.broken = &QPError{QP: w.idx, Err: err}
			return w.broken
		}
		w.done = max(w.done, wc.WRID)
	}
	return nil
}

// ringReader is the receiving end: the owner polls its ring memory for
// complete messages (no completion is generated for an RDMA WRITE).
type ringReader struct {
	mr   *rdma.MR
	b    []byte // ring MR bytes (lease)
	size uint64
	head uint64
}

func (r *ringReader) init(mr *rdma.MR) {
	r.mr, r.b, r.size = mr, mr.Bytes(), uint64(mr.Len()-ctlLen)
}

// poll returns the message at head if one is complete. Entries alias ring
// memory until release.
func (r *ringReader) poll(es []entry) (header, []entry, bool) {
	off := r.head % r.size
	base := ctlLen + off
	can := load64(r.b, base+8)
	if can == 0 {
		return header{}, es, false
	}
	buf := r.b[base : ctlLen+r.size]
	h, err := peekHeader(buf)
	if err != nil {
		return header{}, es, false
	}
	if load64(r.b, base+uint64(h.total)-trailerLen) != can {
		return header{}, es, false // still being written, or torn
	}
	h, es, err = decodeMessage(buf[:h.total], es)
	if err != nil {
		return header{}, es, false
	}
	return h, es, true
}

// release consumes the message at head. The whole slot is zeroed, not just
// the canaries: otherwise a payload that happens to contain a well-formed
// message could be taken for one when a later message starts inside it.
// Then the new head is published for senders that READ it.
func (r *ringReader) release(h header) {
	base := ctlLen + r.head%r.size
	n := alignUp(uint64(h.total), msgAlign)
	clear(r.b[base+16 : base+uint64(h.total)-trailerLen])
	store64(r.b, base+uint64(h.total)-trailerLen, 0)
	store64(r.b, base+8, 0)
	clear(r.b[base : base+8])
	r.head += n
	store64(r.b, ctlHead, r.head)
}

// drain hands up to 16 messages of the ring to use (their entries are valid
// only during the call; es is the caller's scratch) and reports whether
// there were any.
func (r *ringReader) drain(es *[]entry, use func(header, []entry)) bool {
	got := false
	for i := 0; i < 16; i++ {
		h, out, ok := r.poll((*es)[:0])
		*es = out
		if !ok {
			return got
		}
		got = true
		use(h, out)
		clear(out)
		r.release(h)
	}
	return got
}
