package flock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/internal/osyield"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Conn is the connection handle to one server: a set of RC QPs, each with
// its registered rings, shared by every goroutine that calls through it.
type Conn struct {
	cfg     config
	m       *Metrics
	peerID  uint32
	pd      *rdma.PD
	qps     []*clientQP
	regions []rdma.RemoteBuffer
	undo    []func() error

	regMu   sync.Mutex
	callers atomic.Pointer[[]*Caller]
	free    chan *Caller

	outstanding atomic.Int64
	side        sideMetrics
	bell        bell          // the dispatcher's doorbell (bell.go)
	srvRung     atomic.Uint64 // the last sleep epoch of the server's dispatcher woken
	es          []entry       // the dispatcher's scratch
	wake        chan struct{}
	stop        chan struct{}
	wg          sync.WaitGroup
	closed      atomic.Bool
	aborted     atomic.Bool
	qpMu        sync.Mutex // Abort moves live QPs to the error state; release destroys them
	qpsGone     bool       // under qpMu

	messages, entries, migrations, stale atomic.Uint64
	rounds                               atomic.Uint64 // goroutine-scheduler rounds completed
}

// clientQP is one QP of a connection, with its rings and combiner.
type clientQP struct {
	idx  int
	c    *Conn
	qp   *rdma.QP
	w    ringWriter
	resp ringReader
	comb combiner
	mu   sync.Mutex // mutexShared baseline only

	active   atomic.Bool
	granted  atomic.Uint64 // total credits the server granted
	answered atomic.Uint64 // renewals the server answered

	// leader only
	used, renewBase, renewSent uint64
	hist                       []uint32 // coalescing degrees since the last renewal
	es                         []entry
	mem                        []*node
}

// Stats are a connection's counters.
type Stats struct {
	Messages   uint64 // coalesced request messages posted
	Requests   uint64 // requests carried in them
	Migrations uint64 // callers moved between QPs
	Stale      uint64 // responses that arrived after their caller gave up
}

// Stats reports the connection's counters.
func (c *Conn) Stats() Stats {
	return Stats{Messages: c.messages.Load(), Requests: c.entries.Load(), Migrations: c.migrations.Load(),
		Stale: c.stale.Load()}
}

// ActiveQPs reports which QPs the server currently lets this connection use.
func (c *Conn) ActiveQPs() []int {
	var out []int
	for _, l := range c.qps {
		if l.active.Load() {
			out = append(out, l.idx)
		}
	}
	return out
}

// QPs is the number of QPs the connection owns.
func (c *Conn) QPs() int { return len(c.qps) }

const handshakeMagic = "FLK1"

// Dial sets up a connection handle over an established bootstrap
// connection to a Server (which must be in Serve on the other end): it
// creates the QPs and rings, exchanges their endpoints over conn and starts
// the response dispatcher and the goroutine scheduler.
func Dial(ctx context.Context, dev *rdma.Device, conn net.Conn, opts ...Option) (_ *Conn, err error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if !cfg.valid() {
		return nil, fmt.Errorf("flock: invalid options: %w", rdma.ErrInvalid)
	}
	if cfg.mutexShared {
		cfg.maxBatch = 1
	}
	if cfg.metrics == nil {
		cfg.metrics = NewMetrics()
	}
	c := &Conn{cfg: cfg, m: cfg.metrics, free: make(chan *Caller, 1024), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), side: cfg.metrics.side("client")}
	c.callers.Store(&[]*Caller{})
	c.es = make([]entry, 0, 64)
	defer func() {
		if err != nil {
			c.release()
		}
	}()
	if c.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	c.undo = append(c.undo, c.pd.Close)
	if err := c.openBell(dev); err != nil {
		return nil, err
	}
	for i := 0; i < cfg.qps; i++ {
		l, err := c.newQP(dev, i)
		if err != nil {
			return nil, err
		}
		c.qps = append(c.qps, l)
	}
	defer deadlineFrom(ctx, conn)()
	hello := binary.BigEndian.AppendUint16([]byte(handshakeMagic), uint16(cfg.qps))
	if _, err := conn.Write(hello); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("flock: handshake: %w", err))
	}
	for i, l := range c.qps {
		peer, err := l.qp.Bootstrap(ctx, conn, l.resp.mr.Remote())
		if err != nil {
			return nil, err
		}
		if len(peer.Buffers) == 0 {
			return nil, fmt.Errorf("%w: server exposed no ring", ErrProtocol)
		}
		if err := l.w.init(l.w.stage, stageFixed, cfg.maxMsg, peer.Buffers[0]); err != nil {
			return nil, err
		}
		if i == 0 {
			c.regions = peer.Buffers[1:]
		}
	}
	// The server decides the QPs' initial state last; control messages it
	// pushes after that wait in the rings until the dispatcher starts.
	reply := make([]byte, 4+4+cfg.qps*9)
	if _, err := io.ReadFull(conn, reply); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("flock: handshake: %w", err))
	}
	if string(reply[:4]) != handshakeMagic {
		return nil, fmt.Errorf("%w: bad handshake reply", ErrProtocol)
	}
	c.peerID = binary.BigEndian.Uint32(reply[4:])
	if err := c.armBell(); err != nil {
		return nil, err
	}
	for i, l := range c.qps {
		p := reply[8+i*9:]
		l.active.Store(p[0] == 1)
		l.granted.Store(binary.BigEndian.Uint64(p[1:]))
	}
	c.wg.Add(1)
	go c.dispatch()
	if cfg.schedInterval > 0 {
		c.wg.Add(1)
		go c.schedule()
	}
	return c, nil
}

func (c *Conn) newQP(dev *rdma.Device, i int) (*clientQP, error) {
	cfg := &c.cfg
	l := &clientQP{idx: i, c: c, hist: make([]uint32, cfg.maxBatch+1)}
	l.comb = combiner{max: cfg.maxBatch, serve: l.serve, yield: func() bool { return len(*c.callers.Load()) > 1 }}
	scq, err := dev.CreateCQ(2*cfg.maxBatch + 16)
	if err != nil {
		return nil, err
	}
	c.undo = append(c.undo, scq.Close)
	l.qp, err = c.pd.CreateQP(rdma.QPConfig{SendCQ: scq, RecvCQ: c.bell.cq, MaxSendWR: 2*cfg.maxBatch + 8,
		MaxRecvWR: bellRecvs, MaxSGE: 2, RNRRetry: 7})
	if err != nil {
		return nil, err
	}
	c.undo = append(c.undo, l.qp.Close)
	stage, err := c.pd.AllocMR(stageFixed+cfg.maxMsg+cfg.maxBatch*cfg.memSlot, rdma.LocalWrite)
	if err != nil {
		return nil, err
	}
	c.undo = append(c.undo, stage.Close)
	resp, err := c.pd.AllocMR(ctlLen+cfg.ringSize, rdma.LocalWrite|rdma.RemoteWrite|rdma.RemoteRead)
	if err != nil {
		return nil, err
	}
	c.undo = append(c.undo, resp.Close)
	l.resp.init(resp)
	l.w = ringWriter{idx: i, qp: l.qp, scq: scq, stage: stage, headRead: c.m.headReads.Inc}
	return l, nil
}

func (c *Conn) release() {
	c.qpMu.Lock()
	c.qpsGone = true
	c.qpMu.Unlock()
	destroyQPsFirst(c.qps, func(l *clientQP) *rdma.QP { return l.qp })
	for i := len(c.undo) - 1; i >= 0; i-- {
		_ = c.undo[i]()
	}
	c.undo = nil
}

// destroyQPsFirst destroys the verbs QP of each clientQP or serverQP
// before anything else of theirs is released (their own Close in the undo
// list then does nothing). A QP may hold references to the rings its peer
// was writing into: rxe keeps the target MR of a multi-packet WRITE cut
// short by the error state until the QP is destroyed, and Debian 6.1's rxe
// then blocks ibv_dereg_mr until it goes or rxe's pool timeout passes (a
// 20 s stall seen in CI).
// The verbs teardown order is QPs, then MRs, CQs, SRQs and PDs.
func destroyQPsFirst[L any](qps []L, qp func(L) *rdma.QP) {
	for _, l := range qps {
		if q := qp(l); q != nil {
			_ = q.Close()
		}
	}
}

// failQPs moves the connection's QPs to the error state, unless they are
// destroyed already: whatever is posted fails now, not after the
// transport's retries to a server that is gone (~0.5 s on rxe).
func (c *Conn) failQPs() {
	c.qpMu.Lock()
	defer c.qpMu.Unlock()
	if c.qpsGone {
		return
	}
	for _, l := range c.qps {
		_ = l.qp.SetError()
	}
}

// Abort fails every call waiting for a response, and every later call,
// with ErrClosed: for a runtime that learned the server is gone. Safe from
// any goroutine; Close must still follow once the calls returned.
func (c *Conn) Abort() {
	if c.aborted.Swap(true) {
		return
	}
	c.failQPs() // a leader waiting on a post to the gone server fails at once
	for _, cl := range *c.callers.Load() {
		if cl.inflight.Load() > 0 {
			select {
			case cl.resp <- response{seq: cl.curSeq.Load(), status: statusAborted}:
			default: // a response is already waiting for it
			}
		}
	}
}

// Close stops the dispatcher and scheduler and frees the QPs and rings.
// Calls must have returned first.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return ErrClosed
	}
	close(c.stop)
	c.failQPs() // the dispatcher may be waiting on a post (its sleep epoch)
	c.wg.Wait()
	c.release()
	return nil
}

// serve is the leader's work for one batch on this QP: take a prefix the
// credits, the message size and the scratch space allow, post it as one
// chain (memory operations, one coalesced WRITE, maybe a credit renewal)
// with one doorbell, and poll its completion.
func (l *clientQP) serve(b []*node) int {
	w := &l.w
	cfg := &l.c.cfg
	fail := func(nodes []*node, err error) int {
		for _, n := range nodes {
			n.err = err
		}
		return len(nodes)
	}
	if w.broken != nil {
		return fail(b, w.broken)
	}
	if !l.active.Load() {
		return fail(b, errInactive)
	}
	avail := l.granted.Load() - l.used
	if b[0].kind == opCall && avail == 0 {
		if err := l.waitCredits(b[0].ctx); err != nil {
			if errors.Is(err, errInactive) {
				return fail(b, err)
			}
			b[0].err = err
			return 1
		}
		avail = l.granted.Load() - l.used
	}
	k, rpcs, size := 0, uint64(0), headerLen+trailerLen
	l.es, l.mem = l.es[:0], l.mem[:0]
	for _, n := range b {
		if n.kind == opCall {
			sz := metaLen + pad8(len(n.data))
			if rpcs >= avail || size+sz > cfg.maxMsg {
				break
			}
			size += sz
			rpcs++
			l.es = append(l.es, entry{caller: n.caller, seq: n.seq, handler: n.handler, data: n.data})
		} else {
			n.scratch = stageFixed + cfg.maxMsg + len(l.mem)*cfg.memSlot
			l.mem = append(l.mem, n)
			w.wrs = append(w.wrs, memWR(w, n))
		}
		k++
	}
	ctx := b[0].ctx
	if rpcs > 0 {
		h := header{ack: load64(l.resp.b, ctlHead)}
		if err := w.addMessage(ctx, h, l.es); err != nil {
			w.wrs = w.wrs[:0]
			return fail(b[:k], err)
		}
		l.hist[min(k, len(l.hist)-1)]++
		if l.used+rpcs-l.renewBase >= uint64(cfg.credits/2) && l.answered.Load() >= l.renewSent {
			l.addRenewal()
			l.renewBase = l.used + rpcs
		}
	}
	clear(l.es)
	if err := w.post(ctx); err != nil {
		return fail(b[:k], err)
	}
	l.used += rpcs
	if rpcs > 0 {
		l.wakeServer() // the message completed: is the server's dispatcher asleep?
	}
	for _, n := range l.mem {
		switch n.kind {
		case opRead:
			copy(n.dst, w.sb[n.scratch:])
		case opFetchAdd, opCompareSwap:
			n.old = binary.LittleEndian.Uint64(w.sb[n.scratch:])
		}
	}
	for _, n := range b[:k] {
		n.qp = l.idx
	}
	if rpcs > 0 { // memory operations alone are not RPC messages
		l.c.side.degree.Observe(float64(rpcs))
		l.c.messages.Add(1)
		l.c.entries.Add(rpcs)
		l.c.side.messages.Inc()
		l.c.side.requests.Add(float64(rpcs))
	}
	return k
}

func memWR(w *ringWriter, n *node) rdma.SendWR {
	wr := rdma.SendWR{WRID: w.nextID(), NumSGE: 1, RemoteAddr: n.raddr, RKey: n.rkey}
	switch n.kind {
	case opRead:
		wr.Opcode = rdma.OpRDMARead
		wr.SG[0] = w.stage.SGE(n.scratch, len(n.dst))
	case opWrite:
		wr.Opcode = rdma.OpRDMAWrite
		copy(w.sb[n.scratch:], n.data)
		wr.SG[0] = w.stage.SGE(n.scratch, len(n.data))
	case opFetchAdd:
		wr.Opcode = rdma.OpAtomicFetchAndAdd
		wr.SG[0] = w.stage.SGE(n.scratch, 8)
		wr.CompareAdd = n.arg1
	case opCompareSwap:
		wr.Opcode = rdma.OpAtomicCmpAndSwp
		wr.SG[0] = w.stage.SGE(n.scratch, 8)
		wr.CompareAdd, wr.Swap = n.arg1, n.arg2
	}
	return wr
}

// addRenewal appends the credit request: a WRITE_WITH_IMM into the
// server's mailbox whose immediate is the median coalescing degree since
// the last request, which the server's QP scheduler sees on its receive CQ.
func (l *clientQP) addRenewal() {
	w := &l.w
	deg := medianHist(l.hist)
	clear(l.hist)
	wr := rdma.SendWR{WRID: w.nextID(), Opcode: rdma.OpRDMAWriteWithImm, NumSGE: 1, Imm: uint32(max(deg, 1)),
		RemoteAddr: w.remote.Addr + ctlMailbox, RKey: w.remote.RKey}
	wr.SG[0] = w.stage.SGE(stageMailbox, 8)
	w.wrs = append(w.wrs, wr)
	l.renewSent++
}

// waitCredits blocks the leader until the server grants credits, asking
// for them if no request is pending (the half-way request may have been
// declined before a later reactivation).
func (l *clientQP) waitCredits(ctx context.Context) error {
	for spins := 0; ; spins++ {
		if !l.active.Load() {
			return errInactive
		}
		if l.granted.Load() > l.used {
			return nil
		}
		if l.answered.Load() >= l.renewSent {
			l.addRenewal()
			l.renewBase = l.used
			if err := l.w.post(ctx); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if l.c.aborted.Load() {
			return ErrClosed // the server is gone: no grant will come
		}
		backoff(spins)
	}
}

// backoff yields for a while before sleeping: what is waited for (credits,
// an activation) usually arrives within a few scheduling rounds, and a
// timer sleep costs tens of microseconds on a loaded machine.
func backoff(spins int) {
	if spins < 256 {
		runtime.Gosched()
		return
	}
	time.Sleep(time.Duration(min(spins-255, 20)) * 10 * time.Microsecond)
}

func (l *clientQP) submit(n *node) {
	if l.c.cfg.mutexShared {
		l.mu.Lock()
		l.serve([]*node{n})
		l.mu.Unlock()
		return
	}
	l.comb.submit(n)
}

// tryServeOne serves n alone if nobody is serving this QP now.
func (l *clientQP) tryServeOne(n *node) bool {
	return tryServeOne(l.c.cfg.mutexShared, &l.mu, &l.comb, n)
}

// submitAsync enqueues an RPC request node (see combiner.submitAsync) and
// reports whether it is served already.
func (l *clientQP) submitAsync(n *node) bool {
	if l.c.cfg.mutexShared {
		l.submit(n)
		n.free.Store(true)
		return true
	}
	return l.comb.submitAsync(n)
}

// dispatch is the response dispatcher: it polls every QP's response ring
// and hands each response to its caller by caller id and sequence id.
func (c *Conn) dispatch() {
	defer c.wg.Done()
	idle := 0
	var quiet time.Time // when the rings last went empty
	sp := newSpinner()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		if c.poll() {
			sp.found(idle)
			idle = 0
			continue
		}
		if idle == 0 {
			quiet = time.Now()
		}
		idle++
		// While calls are outstanding, keep yielding (not sleeping) for a
		// while: a lone caller's answer is usually a turnaround away, less
		// than a sleep and its wake-up; then sleep on the doorbell.
		if c.outstanding.Load() > 0 && sp.spinning(idle, quiet) {
			runtime.Gosched()
			if idle >= politeAfter {
				osyield.Thread()
			}
			continue
		}
		if c.outstanding.Load() > 0 {
			sp.giveUp()
			switch c.sleep() {
			case slept:
				continue
			case sleepBusy:
				runtime.Gosched()
				continue
			}
		}
		d := 1 * time.Millisecond
		if c.outstanding.Load() > 0 {
			d = time.Duration(min(idle/256, 20)) * 10 * time.Microsecond
		}
		timer.Reset(d)
		select {
		case <-c.stop:
			return
		case <-c.wake:
		case <-timer.C:
		}
	}
}

// poll delivers what the response rings hold (up to 16 messages a QP) and
// reports whether there was anything. Dispatcher only.
func (c *Conn) poll() bool {
	got := false
	for _, l := range c.qps {
		if l.resp.drain(&c.es, func(h header, es []entry) { c.deliver(l, h, es) }) {
			got = true
		}
	}
	return got
}

func (c *Conn) deliver(l *clientQP, h header, es []entry) {
	if h.flags&flagSkip != 0 {
		return
	}
	if h.ack > l.w.peerHead.Load() {
		l.w.peerHead.Store(h.ack)
	}
	if h.credit > l.granted.Load() {
		l.granted.Store(h.credit)
	}
	l.active.Store(h.ctl&ctlInactive == 0)
	if a := h.ctl >> 32; a > l.answered.Load() {
		l.answered.Store(a)
	}
	callers := *c.callers.Load()
	for i := range es {
		e := &es[i]
		if int(e.caller) >= len(callers) {
			c.stale.Add(1)
			continue
		}
		cl := callers[e.caller]
		data, status, joined := e.data, e.status, false
		if e.status == statusMore || cl.part != nil || cl.partErr {
			var done bool
			if data, status, done = c.join(cl, e); !done {
				continue
			}
			joined = true
		}
		// The request is answered: count it off before the caller can see
		// the response, so its next pickQP knows nothing is outstanding
		// and can take a pending migration (decremented after the send, a
		// caller that calls again at once kept seeing inflight 1 and could
		// miss the migration round after round).
		cl.inflight.Add(-1)
		c.outstanding.Add(-1)
		// The slot is written for the caller's current call only, and once
		// (a duplicate sequence id from a broken peer is dropped): the
		// caller reads it between seeing ready and its next call.
		if cl.curSeq.Load() == e.seq && cl.ready.Load() != e.seq {
			r := response{seq: e.seq, status: status, data: data, owned: joined}
			switch {
			case joined:
			case len(data) > rbufKeep:
				r.data, r.owned = append([]byte(nil), data...), true // data is ring memory
			default:
				cl.rbuf = append(cl.rbuf[:0], data...)
				r.data = cl.rbuf
			}
			cl.slot = r
			cl.ready.Store(e.seq)
			if cl.parked.Load() {
				select {
				case cl.resp <- r:
				default: // Abort's answer is there already
				}
			}
		} else {
			c.stale.Add(1)
		}
	}
}

// join collects the parts of a large response (the dispatcher's) and
// reports the whole, with its status, once its last part arrived. Parts of
// an abandoned call are dropped; a response beyond the reply bound fails
// the call with ErrTooLarge.
func (c *Conn) join(cl *Caller, e *entry) ([]byte, uint16, bool) {
	if (cl.part != nil || cl.partErr) && cl.partSeq != e.seq {
		cl.part, cl.partErr = nil, false // an abandoned call's parts
	}
	if cl.part == nil && !cl.partErr && e.status != statusMore {
		return append([]byte(nil), e.data...), e.status, true
	}
	cl.partSeq = e.seq
	if !cl.partErr && len(cl.part)+len(e.data) > c.cfg.maxReply {
		cl.part, cl.partErr = nil, true
	}
	if !cl.partErr {
		if cl.part == nil {
			cl.part = make([]byte, 0, 2*len(e.data))
		}
		cl.part = append(cl.part, e.data...)
	}
	if e.status == statusMore {
		return nil, 0, false
	}
	data, failed := cl.part, cl.partErr
	cl.part, cl.partErr = nil, false
	if failed {
		return []byte(ErrTooLarge.Error()), statusHandlerErr, true
	}
	return data, e.status, true
}

func (c *Conn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// deadlineFrom applies ctx's deadline to conn and lets cancellation
// interrupt blocked I/O; the returned func undoes both.
func deadlineFrom(ctx context.Context, conn net.Conn) func() {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		_ = conn.SetDeadline(time.Time{})
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}
