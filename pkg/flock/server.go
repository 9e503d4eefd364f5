package flock

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/internal/osyield"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Handler runs one RPC on the server. req is only valid until it returns
// (it may point into the request ring).
type Handler func(ctx context.Context, req []byte) ([]byte, error)

// Server is the receiving side: it polls the request rings of every
// connected sender, runs handlers on a worker pool, coalesces responses per
// QP, and runs the QP scheduler that grants credits and decides which QPs
// stay active.
type Server struct {
	cfg      config
	m        *Metrics
	side     sideMetrics
	pd       *rdma.PD
	handlers atomic.Pointer[map[uint16]handlerEntry]
	hmu      sync.Mutex
	regions  []*rdma.MR

	mu      sync.Mutex // peers and regions: connection setup only
	schedMu sync.Mutex // one redistribution at a time
	peers   []*Peer
	qps     atomic.Pointer[[]*serverQP]
	byQPN   atomic.Pointer[map[uint32]*serverQP]
	rcq     *rdma.CQ // every sender's credit renewals, in event mode

	tasks       chan task
	ctx         context.Context
	cancel      context.CancelFunc
	stop        chan struct{}
	loops       sync.WaitGroup
	workers     sync.WaitGroup
	closed      atomic.Bool
	violations  atomic.Uint64
	drops       sync.WaitGroup // peer teardowns in progress (peer.go)
	ctl         sync.WaitGroup // control messages being submitted (pushControl)
	pollSeq     atomic.Uint64  // odd while the dispatcher polls the rings
	nextID      uint32         // under mu
	joined      chan struct{}  // a sender registered: wakes a parked QP scheduler
	schedRounds atomic.Uint64  // QP scheduler loop turns (tests: parked means still)
	nodes       nodePool       // the workers' response nodes

	// the dispatcher's doorbell (bell.go)
	bell       chan struct{}
	bellEpoch  uint64
	bellNode   *node
	sleepPeers []*Peer
	asleep     atomic.Bool // the dispatcher sleeps on the doorbell (all rings idle)
	es         []entry     // the dispatcher's scratch
}

// Peer is one connected sender.
type Peer struct {
	id    uint32
	s     *Server
	qps   []*serverQP
	pd    *rdma.PD // its own, so its QPs reach only its rings (see setup)
	srq   *rdma.SRQ
	undo  []func() error
	recvs []rdma.RecvWR
	rung  atomic.Uint64 // the last sleep epoch of the peer's dispatcher woken
	life  peerLife
	// epochWR is the dispatcher's epoch WRITE still outstanding on QP 0
	// (its work request id; 0: none). Dispatcher only.
	epochWR uint64
}

// serverQP is one server-side QP: the request ring it polls and the response
// path back to the sender's response ring.
type serverQP struct {
	idx  int
	p    *Peer
	qp   *rdma.QP
	w    ringWriter
	req  ringReader
	comb combiner
	mu   sync.Mutex // mutexShared baseline only

	active   atomic.Bool
	granted  atomic.Uint64 // total credits granted on this QP
	answered atomic.Uint64 // renewal requests answered
	received atomic.Uint64 // requests received
	util     atomic.Uint64 // U_ij: reported degrees since the last redistribution
	qpn      uint32
	es       []entry // leader only
	inline   []*node // dispatcher only: responses to one message
}

// maxServerQPs bounds the QPs of all senders together: each may have one
// credit renewal outstanding, and all of them land on one receive CQ.
const maxServerQPs = 8192

type task struct {
	l       *serverQP
	caller  uint32
	seq     uint32
	handler uint16
	data    []byte
	buf     *[]byte // data's pooled storage (reqBufs)
}

// NewServer creates a server on dev and starts its dispatcher, QP
// scheduler and workers. Register handlers and attach regions before
// accepting senders.
func NewServer(dev *rdma.Device, opts ...Option) (*Server, error) {
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
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, err
	}
	rcq, err := dev.CreateCQ(maxServerQPs+64, rdma.WithEvents())
	if err != nil {
		_ = pd.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, m: cfg.metrics, side: cfg.metrics.side("server"), pd: pd, rcq: rcq, tasks: make(chan task, 4096), stop: make(chan struct{}),
		bell: make(chan struct{}, 1), bellNode: newNode(), joined: make(chan struct{}, 1)}
	s.byQPN.Store(&map[uint32]*serverQP{})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.handlers.Store(&map[uint16]handlerEntry{})
	s.qps.Store(&[]*serverQP{})
	s.loops.Add(2)
	go s.dispatch()
	go s.scheduleQPs()
	for i := 0; i < cfg.workers; i++ { // none by default: handlers run on the dispatcher
		s.workers.Add(1)
		go s.work()
	}
	return s, nil
}

// Handle registers h for handler id.
func (s *Server) Handle(id uint16, h Handler) { s.setHandler(id, handlerEntry{plain: h}) }

// AttachRegion registers size bytes of memory for one-sided Read, Write
// and atomics by senders that connect afterwards. The returned region's
// Bytes are the server's view of it.
func (s *Server) AttachRegion(size int) (*rdma.MR, error) {
	mr, err := s.pd.AllocMR(size, rdma.AccessAll)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.regions = append(s.regions, mr)
	s.mu.Unlock()
	return mr, nil
}

// Violations counts messages that carried more requests than the sender
// had been granted credits for (zero for a well-behaved sender).
func (s *Server) Violations() uint64 { return s.violations.Load() }

// ID is the sender id the server assigned.
func (p *Peer) ID() uint32 { return p.id }

// ActiveQPs lists the QPs the server keeps active for this sender.
func (p *Peer) ActiveQPs() []int {
	var out []int
	for _, l := range p.qps {
		if l.active.Load() {
			out = append(out, l.idx)
		}
	}
	return out
}

// Credits reports, for one QP, the credits granted so far and the
// requests received so far.
func (p *Peer) Credits(qp int) (granted, received uint64) {
	l := p.qps[qp]
	return l.granted.Load(), l.received.Load()
}

// register gives a connected newcomer its share of active QPs (eq. 3.1's
// rule for joining senders) and publishes it to the dispatcher and the QP
// scheduler; it returns the handshake reply (sender id, per QP: active flag
// and credits).
func (s *Server) register(p *Peer) ([]byte, error) {
	s.schedMu.Lock()
	defer s.schedMu.Unlock()
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	p.id = s.nextID
	s.nextID++
	var functioning []int
	total := 0
	for _, q := range s.peers {
		a := len(q.ActiveQPs())
		total += a
		if a > 1 {
			functioning = append(functioning, a)
		}
	}
	share := NewSenderShare(functioning, total, s.cfg.maxAQP, len(p.qps))
	// When even the newcomer's one QP does not fit under MAX_AQP, it starts
	// with none and an immediate redistribution (below) makes room first,
	// so the limit holds throughout.
	crowded := total+share > s.cfg.maxAQP
	if crowded {
		share = 0
	}
	reply := binary.BigEndian.AppendUint32([]byte(handshakeMagic), p.id)
	for i, l := range p.qps {
		on := i < share
		l.active.Store(on)
		if on {
			l.granted.Store(uint64(s.cfg.credits))
			reply = append(reply, 1)
		} else {
			reply = append(reply, 0)
		}
		reply = binary.BigEndian.AppendUint64(reply, l.granted.Load())
	}
	s.peers = append(s.peers, p)
	peers := append([]*Peer(nil), s.peers...)
	all := append(append([]*serverQP(nil), *s.qps.Load()...), p.qps...)
	s.qps.Store(&all)
	byQPN := make(map[uint32]*serverQP, len(all))
	for _, l := range all {
		byQPN[l.qpn] = l
	}
	s.byQPN.Store(&byQPN)
	s.m.activeQPs.WithLabelValues(strconv.Itoa(int(p.id))).Set(float64(share))
	s.m.peers.Inc()
	s.m.qps.Add(float64(len(p.qps)))
	s.mu.Unlock()
	select {
	case s.joined <- struct{}{}:
	default:
	}
	if crowded {
		s.redistributeLocked(peers)
	}
	s.nudge() // a sleeping dispatcher has not told the newcomer its epoch
	return reply, nil
}

// Accept sets up a sender that is in Dial at the other end of conn and
// returns once its QPs are connected. A new sender gets the average share
// of active QPs (eq. 3.1's rule for joining senders).
func (s *Server) Accept(ctx context.Context, dev *rdma.Device, conn net.Conn) (_ *Peer, err error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	defer deadlineFrom(ctx, conn)()
	hello := make([]byte, 6)
	if _, err := io.ReadFull(conn, hello); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("flock: handshake: %w", err))
	}
	qps := int(binary.BigEndian.Uint16(hello[4:]))
	if string(hello[:4]) != handshakeMagic || qps < 1 {
		return nil, fmt.Errorf("%w: bad hello", ErrProtocol)
	}
	if len(*s.qps.Load())+qps > maxServerQPs {
		return nil, fmt.Errorf("flock: server QP limit %d reached: %w", maxServerQPs, rdma.ErrNoResources)
	}
	p := &Peer{s: s, life: peerLife{done: make(chan struct{})}}
	registered := false
	defer func() {
		// Once registered, the peer is torn down like any other.
		if err != nil {
			if registered {
				_ = p.Close()
			} else {
				p.release()
			}
		}
	}()
	if err := p.setup(dev, qps); err != nil {
		return nil, err
	}
	s.mu.Lock()
	regions := make([]rdma.RemoteBuffer, len(s.regions))
	for i, r := range s.regions {
		regions[i] = r.Remote()
	}
	s.mu.Unlock()
	// Connect first and decide the QPs' initial state last, under the
	// scheduler's lock, so no redistribution runs between counting the
	// active QPs and registering the newcomer.
	for _, l := range p.qps {
		peer, err := l.qp.Bootstrap(ctx, conn, append([]rdma.RemoteBuffer{l.req.mr.Remote()}, regions...)...)
		if err != nil {
			return nil, err
		}
		if len(peer.Buffers) == 0 {
			return nil, fmt.Errorf("%w: sender exposed no ring", ErrProtocol)
		}
		if err := l.w.init(l.w.stage, stageFixed, s.cfg.maxMsg, peer.Buffers[0]); err != nil {
			return nil, err
		}
	}
	reply, err := s.register(p)
	if err != nil {
		return nil, err
	}
	registered = true
	if _, err := conn.Write(reply); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("flock: handshake: %w", err))
	}
	return p, nil
}

func (p *Peer) setup(dev *rdma.Device, qps int) error {
	s := p.s
	cfg := &s.cfg
	depth := 2*qps + 8
	// Each sender gets a protection domain of its own, as each connection
	// gets its own keys on a NIC: its QPs cannot name another sender's
	// rings, and on shm it maps only its own PD's segment. A server with
	// attached regions (one-sided access shared by all senders) keeps its
	// senders in the regions' PD.
	s.mu.Lock()
	shared := len(s.regions) > 0
	s.mu.Unlock()
	p.pd = s.pd
	if !shared {
		pd, err := dev.AllocPD()
		if err != nil {
			return err
		}
		p.pd = pd
		p.undo = append(p.undo, pd.Close)
	}
	var err error
	if p.srq, err = p.pd.CreateSRQ(depth, 1); err != nil {
		return err
	}
	p.undo = append(p.undo, p.srq.Close)
	p.recvs = make([]rdma.RecvWR, depth)
	for i := range p.recvs {
		p.recvs[i] = rdma.RecvWR{WRID: uint64(i)}
	}
	if err := p.srq.PostRecv(p.recvs); err != nil {
		return err
	}
	for i := 0; i < qps; i++ {
		l := &serverQP{idx: i, p: p}
		l.comb = combiner{max: cfg.maxBatch, serve: l.serve}
		if cfg.workers > 1 {
			l.comb.yield = func() bool { return true }
		}
		scq, err := dev.CreateCQ(2*cfg.maxBatch + 16)
		if err != nil {
			return err
		}
		p.undo = append(p.undo, scq.Close)
		if l.qp, err = p.pd.CreateQP(rdma.QPConfig{SendCQ: scq, RecvCQ: s.rcq, SRQ: p.srq,
			MaxSendWR: 2*cfg.maxBatch + 8, MaxSGE: 2, RNRRetry: 7}); err != nil {
			return err
		}
		p.undo = append(p.undo, l.qp.Close)
		stage, err := p.pd.AllocMR(stageFixed+cfg.maxMsg, rdma.LocalWrite)
		if err != nil {
			return err
		}
		p.undo = append(p.undo, stage.Close)
		ring, err := p.pd.AllocMR(ctlLen+cfg.ringSize, rdma.LocalWrite|rdma.RemoteWrite|rdma.RemoteRead)
		if err != nil {
			return err
		}
		p.undo = append(p.undo, ring.Close)
		l.req.init(ring)
		l.w = ringWriter{idx: i, qp: l.qp, scq: scq, stage: stage, headRead: s.m.headReads.Inc}
		ep, err := l.qp.Endpoint()
		if err != nil {
			return err
		}
		l.qpn = ep.QPN
		p.qps = append(p.qps, l)
	}
	return nil
}

func (p *Peer) release() {
	destroyQPsFirst(p.qps, func(l *serverQP) *rdma.QP { return l.qp })
	for i := len(p.undo) - 1; i >= 0; i-- {
		_ = p.undo[i]()
	}
	p.undo = nil
}

// Close stops the server and frees every sender's QPs and rings and the
// attached regions.
func (s *Server) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	s.cancel()
	close(s.stop)
	s.loops.Wait()
	close(s.tasks)
	s.workers.Wait()
	// Teardowns that began before Close finish first (forget saw closed
	// false); later ones leave their peers to this.
	s.schedMu.Lock()
	s.mu.Lock()
	peers := s.peers
	s.peers = nil
	s.mu.Unlock()
	s.schedMu.Unlock()
	s.ctl.Wait() // pushControl runs under schedMu or on the stopped QP scheduler
	s.drops.Wait()
	for _, p := range peers {
		// A leader may still be inside the gate (tryLeadOne hands detached
		// responses to a goroutine of their own): it is done first.
		p.life.closing.Store(true)
		for p.life.users.Load() != 0 {
			time.Sleep(50 * time.Microsecond)
		}
		p.life.once.Do(func() {
			err := error(ErrClosed)
			p.life.cause.Store(&err)
			p.life.closing.Store(true)
			close(p.life.done)
		})
		p.release()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.regions {
		_ = r.Close()
	}
	_ = s.rcq.Close()
	return s.pd.Close()
}

// idleLong is the number of empty rounds after which a server dispatcher
// that cannot sleep on the doorbell yet (many senders, see bellQuiet) naps
// 1 ms at a time instead of up to 200 µs.
const idleLong = 256 + 5000

// dispatch is the request dispatcher: it polls every request ring, checks
// the sender stayed within its credits, and hands requests to the workers.
func (s *Server) dispatch() {
	defer s.loops.Done()
	s.es = make([]entry, 0, 64)
	idle := 0
	var quiet time.Time // when the rings last went empty
	sp := newSpinner()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		if s.poll() {
			sp.found(idle)
			idle = 0
			continue
		}
		if idle == 0 {
			quiet = time.Now()
		}
		idle++
		// Yield rather than sleep for a while after the last request: the
		// next one of a closed-loop caller is usually a turnaround away.
		if sp.spinning(idle, quiet) {
			runtime.Gosched()
			if idle >= politeAfter {
				osyield.Thread()
			}
			continue
		}
		sp.giveUp()
		// Then sleep on the doorbell (bell.go): the first request wakes
		// it, and an idle server costs no CPU. Naps only until it can be
		// (a sender's epoch write outstanding; with many senders, not yet
		// quiet long enough): a Go timer nap lasts ~1 ms when the process
		// is otherwise idle.
		if time.Since(quiet) >= s.cfg.idleSleep {
			switch s.sleep(time.Since(quiet)) {
			case slept:
				continue
			case sleepBusy:
				runtime.Gosched()
				continue
			}
		}
		d := time.Duration(min(idle/256, 20)) * 10 * time.Microsecond
		if idle > idleLong {
			d = time.Millisecond
		}
		timer.Reset(d)
		select {
		case <-s.stop:
			return
		case <-timer.C:
		}
	}
}

// poll accepts what the request rings hold (up to 16 messages a QP) and
// reports whether there was anything. Dispatcher only.
func (s *Server) poll() bool {
	s.pollSeq.Add(1) // odd: teardowns wait for this poll (peer.go)
	defer s.pollSeq.Add(1)
	got := false
	for _, l := range *s.qps.Load() {
		if l.req.drain(&s.es, func(h header, es []entry) { s.accept(l, h, es) }) {
			got = true
		}
	}
	return got
}

func (s *Server) accept(l *serverQP, h header, es []entry) {
	if h.flags&flagSkip != 0 {
		return
	}
	if h.ack > l.w.peerHead.Load() {
		l.w.peerHead.Store(h.ack)
	}
	if l.received.Add(uint64(len(es))) > l.granted.Load() {
		s.violations.Add(1)
	}
	if s.cfg.workers == 0 {
		s.runInline(l, es)
		return
	}
	if in := s.cfg.inline; in != nil {
		// The requests the hint lets run here move to the front (es is the
		// dispatcher's scratch); the rest go to the workers first, so they
		// run while the dispatcher handles its share.
		k := 0
		for i := range es {
			if in(es[i].handler, es[i].data) {
				es[k], es[i] = es[i], es[k]
				k++
			}
		}
		s.toWorkers(l, es[k:])
		if k > 0 {
			s.runInline(l, es[:k])
		}
		return
	}
	s.toWorkers(l, es)
}

// toWorkers hands requests to the worker pool, each with a copy of its
// data (the ring slot is reused once the dispatcher moves on), in a
// pooled buffer the response's node gives back once it is reused.
func (s *Server) toWorkers(l *serverQP, es []entry) {
	for i := range es {
		e := &es[i]
		bp := s.nodes.bufs.get()
		*bp = append((*bp)[:0], e.data...)
		t := task{l: l, caller: e.caller, seq: e.seq, handler: e.handler, data: *bp, buf: bp}
		select {
		case s.tasks <- t:
		case <-s.stop:
			return
		}
	}
}

// runInline runs the handlers of one message on the dispatcher (the
// default, WithWorkers(0)) and hands all responses to the QP's combining
// queue as one run, so they leave in one message. The requests are read
// straight from the ring: zero-copy, which is why a handler must not keep
// req after it returns.
func (s *Server) runInline(l *serverQP, es []entry) {
	for len(l.inline) < len(es) {
		l.inline = append(l.inline, newNode())
	}
	ns := l.inline[:len(es)]
	for i := range es {
		e := &es[i]
		s.call(ns[i], l, e.caller, e.seq, e.handler, e.data)
	}
	for i := 0; i < len(ns); i++ {
		if parts := s.split(ns[i], newNode); parts != nil { // rare: a large response
			ns = append(ns[:i:i], append(parts, ns[i:]...)...)
			i += len(parts)
		}
	}
	if l.p.s.cfg.mutexShared {
		for _, n := range ns {
			l.submit(n)
		}
	} else {
		l.comb.submitChain(ns)
	}
	for _, n := range ns { // posted: nothing references their data any more
		n.data = nil
		n.recycle(&s.nodes.bufs)
	}
}

// work runs tasks; a response is handed to its QP's combining queue
// detached, so the worker takes its next task at once instead of waiting
// for the leader to post it.
func (s *Server) work() {
	defer s.workers.Done()
	for t := range s.tasks {
		n := s.nodes.get()
		n.req = t.buf // the request may live on in the response: kept with it
		s.call(n, t.l, t.caller, t.seq, t.handler, t.data)
		parts := s.split(n, s.nodes.get)
		if parts != nil {
			n.req = nil // parts alias it too: left to the collector
		}
		for _, part := range parts {
			t.l.submitDetached(part)
		}
		n.wait = waitNone
		t.l.submitDetached(n)
	}
}

// partSize is the most response data one message carries alone.
func (s *Server) partSize() int { return (s.cfg.maxMsg - headerLen - trailerLen - metaLen) &^ 7 }

// split cuts a response too large for one message into parts: it returns
// nodes (from get) for all but the last part, which stays in n. Submitted
// in order on the QP, they arrive in order; the client joins them
// (statusMore). nil when the response fits.
func (s *Server) split(n *node, get func() *node) []*node {
	size := s.partSize()
	if len(n.data) <= size {
		return nil
	}
	var parts []*node
	for len(n.data) > size {
		p := get()
		p.ctx, p.kind, p.caller, p.seq, p.handler, p.status, p.data = n.ctx, opResp, n.caller, n.seq, n.handler, statusMore, n.data[:size:size]
		parts = append(parts, p)
		n.data = n.data[size:]
	}
	return parts
}

func (l *serverQP) submitDetached(n *node) {
	if l.p.s.cfg.mutexShared {
		l.submit(n)
		n.free.Store(true)
		n.pool.put(n)
		return
	}
	l.comb.submitAsync(n)
}

func (l *serverQP) submit(n *node) {
	if l.p.s.cfg.mutexShared {
		l.mu.Lock()
		l.serve([]*node{n})
		l.mu.Unlock()
		return
	}
	l.comb.submit(n)
}

// serve is the response leader: coalesce the batch's responses into one
// message whose header also carries the request-ring head and the QP's
// credit state, post it, poll its completion; then tell WithSent of the
// responses that left.
func (l *serverQP) serve(b []*node) int {
	k := l.post(b)
	if sent := l.p.s.cfg.sent; sent != nil {
		for _, n := range b[:k] {
			if n.kind == opResp && n.size > 0 {
				sent(n.handler, n.size)
			}
		}
	}
	return k
}

// post is serve without WithSent.
func (l *serverQP) post(b []*node) int {
	w := &l.w
	s := l.p.s
	if !l.p.enter() {
		for _, n := range b {
			n.err = errPeerClosed
		}
		return len(b)
	}
	defer l.p.exit()
	defer func() {
		if w.broken != nil {
			l.p.fail(w.broken) // a peer that cannot be written to is torn down
		}
	}()
	switch b[0].kind {
	case opWrite: // the dispatcher's sleep epoch, alone (tryServeOne)
		l.postEpoch(b[0])
		return 1
	}
	k, size := 0, headerLen+trailerLen
	l.es = l.es[:0]
	for _, n := range b {
		if n.kind == opResp {
			sz := metaLen + pad8(len(n.data))
			if size+sz > s.cfg.maxMsg {
				break
			}
			size += sz
			l.es = append(l.es, entry{caller: n.caller, seq: n.seq, handler: n.handler, status: n.status, data: n.data})
		}
		k++
	}
	k = max(k, 1)
	ctl := l.answered.Load() << 32
	if !l.active.Load() {
		ctl |= ctlInactive
	}
	h := header{ack: load64(l.req.b, ctlHead), credit: l.granted.Load(), ctl: ctl}
	if len(l.es) == 0 {
		h.flags = flagCtl
	}
	err := w.addMessage(s.ctx, h, l.es)
	clear(l.es)
	if err == nil {
		err = w.post(s.ctx)
	}
	if err == nil {
		l.ringIfAsleep() // the message has completed at the peer
	}
	if err == nil && len(l.es) > 0 {
		s.side.degree.Observe(float64(len(l.es)))
		s.side.messages.Inc()
		s.side.requests.Add(float64(len(l.es)))
	}
	for _, n := range b[:k] {
		n.err = err
	}
	return k
}
