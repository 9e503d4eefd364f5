package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/ratelog"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// connBurst is the number of connections from which their closing down
// to a quarter returns memory to the OS.
const connBurst = 1000

// ErrServerClosed is returned by Serve and ListenAndServe after Shutdown or Close.
var ErrServerClosed = errors.New("server: closed")

// Server serves registered services on any number of listeners.
type Server struct {
	opts options
	log  *slog.Logger
	reg  *prometheus.Registry
	met  *metrics
	smet *streamMetrics

	methods atomic.Pointer[map[string]*method]
	// fnWindows: the streaming functions' own receive windows, for the
	// hello reply (storeFnWindows)
	fnWindows atomic.Pointer[[]wire.FnWindow]
	regMu     sync.Mutex
	svcs      map[string]*Service
	// badHTTP logs once that HTTPHandler refuses every request (its
	// options are bad: no error can be returned where it is mounted).
	badHTTP sync.Once

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	connPeak  int           // most connections since the last give-back (removeConn)
	connSeq   atomic.Uint32 // numbers connections for their metric shard (callmeter.go)
	shutting  atomic.Bool
	closed    bool
	connWG    sync.WaitGroup // one per open connection
	callWG    sync.WaitGroup // one per executing call

	slots  *slotSem
	pool   pool
	budget budget
	// coldLease: how long a cold call holds its place (replygate.go);
	// coldLease unless a test set another before serving.
	coldLease time.Duration

	clock     atomic.Int64 // coarse time since epoch, advanced by the sweeper (timeouts.go)
	sweepOnce sync.Once
	sweepStop sync.Once
	sweepQuit chan struct{}
	sweepWG   sync.WaitGroup

	devMu          sync.Mutex
	devs           map[string]*fastpath.Device // verbs device of the lanes per local address, opened on first use
	devFailed      map[string]bool
	rdmaSpec       fastpath.RDMASpec // the device/GID override (options, environment)
	closedForLanes bool
	flock          flockState
	laneBudget     laneBudget // fast-path budgets (lanebudget.go)
	laneMeters     laneMeters // dedicated lanes' call counts (lanemeter.go)
	notes          sync.Map   // configuration notes already logged (once per server)
	// laneJoins: the client and bidirectional streams on lanes whose
	// second lane has not joined yet, by token (stream_lane.go).
	laneJoins sync.Map
	// lentReplies counts the stream lane replies whose frames were
	// written straight into the reply's memory (stream_lane.go, lendReply).
	lentReplies atomic.Uint64
	// lentPolls counts the held polls that found their reply memory lent
	// to the outbox.
	lentPolls atomic.Uint64
	// turnExchanges counts the stream lane exchanges a handler ran at its
	// wait for credit (stream_laneturn.go)
	turnExchanges atomic.Uint64
	turnWaits     atomic.Int64 // handlers waiting in their turn for a request now
	// nextLeases counts the stream lane replies whose exchange lent the
	// outbox the engine's other staging buffer for the next (lendNext).
	nextLeases atomic.Uint64

	debugOnce sync.Once
	debugSrv  *http.Server
	debugLn   net.Listener
	debugErr  error

	registration *registration // WithRegistrar; nil without
}

// method is a registered method with its precomputed metric children.
type method struct {
	svc     string
	m       *Method
	stats   [numTransports]*methodStats                       // eagerStats labels: made at registration
	lstats  [numTransports]atomic.Pointer[methodStats]        // lane transports: made on first use
	timeout time.Duration                                     // server-side hint timeout; 0 = none
	set     hints.Set                                         // server-side hints (lanes plan from them)
	reqSize int                                               // the client's declared request size (sizes lane buffers)
	replies [numEngine + 1]atomic.Pointer[prometheus.Counter] // lane replies by engine protocol, then FLOCK's; made on first use
	repHint wire.SizeHint                                     // size of the last reply over TCP; see conn.replyHinted
	cold    chan struct{}                                     // a place per call started before repHint knew a size (replygate.go)
	borrow  bool                                              // borrow_args: binary arguments alias the request buffer (TCP)
	bctx    bool                                              // borrow_ctx: a lane reuses the call's context for its next call
	bmsgs   bool                                              // borrow_msgs: a stream message's binary values alias its frame until the next RecvMsg
	lim     *proto.Limits                                     // decoder limits of its arguments (WithContainerLimit)
	limiter Limiter                                           // rate limit (WithRateLimit); nil = none
	calls   sync.Pool                                         // reset call values (callpool.go)
	window  wire.StreamWindows                                // a stream's receive window (stream_window); zero: the connection's
}

// New creates a server; register services, then Serve.
func New(opts ...Option) *Server {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	if o.maxCalls < 1 {
		o.maxCalls = 1
	}
	if o.maxConns < 1 {
		o.maxConns = 1
	}
	if p, err := fastpath.ParseProvider(o.rdma); err == nil {
		o.rdma = p // "off" is "": no lanes; a bad name fails Serve (checkBuilt)
	}
	s := &Server{
		opts:      o,
		log:       o.logger,
		reg:       o.registry,
		svcs:      map[string]*Service{},
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
		slots:     newSlotSem(o.maxCalls),

		registration: newRegistration(o.registrar),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.reg == nil {
		// A private registry is all /metrics shows, so it carries the Go
		// runtime and process series operators expect (GC, heap,
		// goroutines, CPU); a registry the user passes may have them.
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s.met = newMetrics(s.reg, s.laneMeters.snapshot)
	s.smet = newStreamMetrics(s.reg) // streammetrics.go
	s.laneBudget.init(o.laneLimits)
	s.pool.init()
	s.pool.onRetire = s.budget.giveBack
	s.budget.init(o.memBudget, o.memPerConn, o.fastShare)
	s.coldLease = coldLease
	s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "hatrpc", Subsystem: "server", Name: "request_memory_bytes",
		Help: "Request and reply memory admitted by the budget and not yet released (WithMemoryBudget).",
	}, s.budget.inUse))
	s.sweepQuit = make(chan struct{})
	s.clock.Store(int64(time.Since(epoch)))
	empty := map[string]*method{}
	s.methods.Store(&empty)
	return s
}

// Registry returns the registry holding the server's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Register adds a service. Its methods answer to "Service:method" and, unless
// an earlier service already claimed the plain name, to "method". It panics
// on a duplicate service name or a malformed method.
func (s *Server) Register(svc *Service) {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if _, dup := s.svcs[svc.Name]; dup {
		panic(fmt.Sprintf("server: service %q registered twice", svc.Name))
	}
	s.svcs[svc.Name] = svc
	old := *s.methods.Load()
	next := make(map[string]*method, len(old)+2*len(svc.Methods))
	for k, v := range old {
		next[k] = v
	}
	for i := range svc.Methods {
		m := &svc.Methods[i]
		if m.Name == "" || (m.NewArgs == nil || m.Handle == nil) && (m.Stream == stream.None || m.HandleStream == nil) {
			panic(fmt.Sprintf("server: method %q of %q needs Name, NewArgs and Handle (a streaming one HandleStream)", m.Name, svc.Name))
		}
		rm := &method{svc: svc.Name, m: m, cold: make(chan struct{}, coldMax)}
		h := m.Hints
		if h == nil {
			h = svc.Hints.Function(m.Name) // nil-safe; service-level table
		}
		if s.opts.svcLevel {
			h = nil
		}
		var reqSize int // the client's declared request size sizes our pre-known buffer
		if h != nil {
			rm.set, reqSize = h.Server, h.Client.PayloadSize
		} else if svc.Hints != nil {
			rm.set, reqSize = svc.Hints.Server, svc.Hints.Client.PayloadSize
		}
		rm.timeout = rm.set.Timeout
		rm.borrow = rm.set.BorrowArgs && !s.opts.ownedArgs
		rm.bmsgs = rm.set.BorrowMsgs && !s.opts.ownedArgs
		rm.bctx = rm.set.BorrowCtx && !s.opts.ownedArgs
		rm.reqSize = reqSize
		if m.Stream != stream.None {
			b, msgs := hints.StreamWindowOf(rm.set) // what the plan's table shows (Server.Plan)
			rm.window = wire.StreamWindows{Messages: int32(msgs), Bytes: int32(b)}
		}
		rm.lim = s.methodLimits(svc.Name, m.Name)
		rm.limiter = s.methodLimiter(svc.Name, m.Name)
		// Lane transports get their metric children on first use, so a
		// server shows only the transports it really serves.
		for tr := range uint8(numTransports) {
			if eagerStats(tr) {
				rm.stats[tr] = s.newStats(rm, tr)
				s.met.track(rm.stats[tr])
			}
		}
		next[svc.Name+":"+m.Name] = rm
		if _, taken := next[m.Name]; !taken {
			next[m.Name] = rm
		}
	}
	s.methods.Store(&next)
	s.storeFnWindows(next)
}

// storeFnWindows lists the per-stream receive windows of the streaming
// functions that have one, by every name an open may give them, for the
// hello reply (grantStreams).
func (s *Server) storeFnWindows(methods map[string]*method) {
	var ws []wire.FnWindow
	for name, m := range methods {
		if m.window.Bytes > 0 {
			ws = append(ws, wire.FnWindow{Function: name, Messages: m.window.Messages, Bytes: m.window.Bytes})
		}
	}
	slices.SortFunc(ws, func(a, b wire.FnWindow) int { return strings.Compare(a.Function, b.Function) })
	s.fnWindows.Store(&ws)
}

// methodLimits returns the decoder limits for the arguments of svc:name.
func (s *Server) methodLimits(svc, name string) *proto.Limits {
	n, ok := s.opts.containerLimits[svc+":"+name]
	if !ok {
		n, ok = s.opts.containerLimits[name]
	}
	if !ok || n >= s.opts.limits.MaxContainerSize {
		return &s.opts.limits
	}
	l := s.opts.limits
	l.MaxContainerSize = max(n, 0)
	return &l
}

func (s *Server) lookup(name []byte) *method {
	return (*s.methods.Load())[string(name)]
}

// methodCache keeps the method a connection's or a lane's calls named
// last: their calls mostly name one function, so matching the name's
// bytes saves the table's lookup (~60 instructions a call). A Register
// since (a new table) makes it look again. Its owner's calls are read one
// at a time (the read role, a lane's one call).
type methodCache struct {
	m    *method
	tab  *map[string]*method // the table m was found in
	name []byte              // the name m was found by
}

// find returns the method name names in s's table, or nil.
func (mc *methodCache) find(s *Server, name []byte) *method {
	tab := s.methods.Load()
	if mc.m != nil && mc.tab == tab && string(mc.name) == string(name) {
		return mc.m
	}
	m := (*tab)[string(name)]
	if m != nil {
		mc.m, mc.tab, mc.name = m, tab, append(mc.name[:0], name...)
	}
	return m
}

// ListenAndServe listens on addr (host:port, or a unix socket
// `unix:/path` or `unix:@name`: see Listen) and serves it.
func (s *Server) ListenAndServe(addr string) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Serve accepts connections on ln until Shutdown or Close; it always returns
// a non-nil error, ErrServerClosed after a shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if err := checkBuilt(s.opts.rdma); err != nil {
		ln.Close()
		return err
	}
	if err := s.opts.checkFastPathShare(); err != nil {
		ln.Close()
		return err
	}
	if err := s.opts.checkLimits(); err != nil {
		ln.Close()
		return err
	}
	if err := s.checkRDMAChoice(ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	if s.opts.tls != nil {
		ln = tls.NewListener(ln, s.opts.tls)
	}
	if s.opts.debugAddr != "" {
		if _, err := s.StartDebug(); err != nil {
			ln.Close()
			return err
		}
	}
	s.mu.Lock()
	if s.closed || s.shutting.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	s.startSweeper()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	if err := s.registration.register(ln); err != nil {
		return err
	}
	var backoff AcceptBackoff
	acceptLog := ratelog.New(s.log, ratelog.DefaultEvery)
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.shutting.Load() {
				return ErrServerClosed
			}
			if !AcceptRetryable(err) {
				return err
			}
			wait := backoff.Next()
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				acceptLog.Warn("hatrpc: accept failed; retrying", "err", err, "retry_in", wait)
			}
			time.Sleep(wait)
			continue
		}
		backoff.Reset()
		s.accept(nc)
	}
}

func (s *Server) accept(nc net.Conn) {
	s.mu.Lock()
	if s.closed || s.shutting.Load() {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.opts.maxConns {
		s.mu.Unlock()
		s.met.rejected.WithLabelValues("max_conns").Inc()
		s.log.Warn("hatrpc: connection rejected: too many connections",
			"remote", nc.RemoteAddr().String(), "max", s.opts.maxConns)
		nc.Close()
		return
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	s.met.conns.Inc()
	s.pool.run(c)
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	// A burst of connections gone (an attack closed by the time limits,
	// clients leaving): their buffers and goroutine stacks are garbage the
	// heap would keep; give the memory back.
	n := len(s.conns)
	s.connPeak = max(s.connPeak, n+1)
	burstOver := s.connPeak >= connBurst && n <= s.connPeak/4
	if burstOver {
		s.connPeak = n
	}
	s.mu.Unlock()
	if burstOver {
		s.budget.giveBack()
	}
	s.met.conns.Dec()
	s.connWG.Done()
}

// Shutdown stops accepting, stops reading new calls, lets in-flight calls
// finish and their replies reach the socket, then closes every connection.
// When ctx ends first it falls back to Close and returns ctx.Err().
// A server with a Registrar withdraws from its registry first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.deregister(ctx)
	s.shutting.Store(true)
	s.mu.Lock()
	for ln := range s.listeners {
		ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
		s.callWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.finish()
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close closes listeners and connections at once, cancelling the contexts of
// in-flight calls, and waits for their goroutines (handlers should honour ctx).
func (s *Server) Close() error {
	s.deregister(context.Background())
	s.shutting.Store(true)
	s.mu.Lock()
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.why.CompareAndSwap(whyNone, whyShutdown)
		c.abort()
	}
	s.mu.Unlock()
	s.cancelFlock()
	s.connWG.Wait()
	s.callWG.Wait()
	s.finish()
	return nil
}

func (s *Server) finish() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopSweeper()
	s.budget.stop()
	s.pool.stop()
	s.closeFlock()
	s.releaseDevice()
	// A StartDebug after this point must not start a listener nobody closes.
	s.debugOnce.Do(func() { s.debugErr = ErrServerClosed })
	s.mu.Lock()
	dbg := s.debugSrv
	s.mu.Unlock()
	if dbg != nil {
		dbg.Close()
	}
}

// StartDebug starts the pprof and /metrics listener configured with
// WithDebugAddr (Serve calls it too) and returns its address.
func (s *Server) StartDebug() (net.Addr, error) {
	s.debugOnce.Do(func() {
		if s.opts.debugAddr == "" {
			s.debugErr = errors.New("server: no debug address configured")
			return
		}
		ln, err := net.Listen("tcp", s.opts.debugAddr)
		if err != nil {
			s.debugErr = err
			return
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		s.mu.Lock()
		s.debugLn, s.debugSrv = ln, srv
		s.mu.Unlock()
		go srv.Serve(ln)
	})
	if s.debugErr != nil {
		return nil, s.debugErr
	}
	return s.debugLn.Addr(), nil
}

// splitName returns the method part of a possibly multiplexed name.
func splitName(name string) string {
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// pool runs connection readers. A reader that has read a call hands the
// connection to another pool goroutine (leader/followers) and runs the call
// itself, so the handoff's wake-up is off the call's latency path and no
// goroutine is created per call once the pool is warm. Idle workers form a
// LIFO stack: the busiest few are reused, and the ones left at the bottom
// for poolIdle exit, so a burst of connections does not leave thousands of
// goroutines behind.
type pool struct {
	mu      sync.Mutex
	idle    []*worker // top = most recently used
	stopped bool
	wg      sync.WaitGroup
	once    sync.Once
	quit    chan struct{}

	idleFor, sweepEvery time.Duration
	onRetire            func() // after the sweeper retired a burst's workers
	retired             int    // sweeper-owned: retired since onRetire last ran
}

type worker struct {
	ch   chan *conn // nil conn = exit
	last time.Time
}

const (
	poolIdle  = 30 * time.Second
	poolSweep = 5 * time.Second
	// poolKeep idle workers wait poolIdle; beyond them, workers idle for
	// a sweep period retire: after 10,000 connections went, their
	// workers' stacks are memory nobody will reuse soon.
	poolKeep = 256
)

func (p *pool) init() {
	p.quit = make(chan struct{})
	p.idleFor, p.sweepEvery = poolIdle, poolSweep
}

func (p *pool) run(c *conn) {
	p.once.Do(func() {
		p.wg.Add(1)
		go p.sweeper()
	})
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.ch <- c
		return
	}
	p.mu.Unlock()
	w := &worker{ch: make(chan *conn, 1)}
	p.wg.Add(1)
	go p.loop(w, c)
}

func (p *pool) loop(w *worker, c *conn) {
	defer p.wg.Done()
	for c != nil {
		c.serve()
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		w.last = time.Now()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		c = <-w.ch
	}
}

// sweeper retires workers idle for longer than poolIdle.
func (p *pool) sweeper() {
	defer p.wg.Done()
	t := time.NewTicker(p.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case now := <-t.C:
			p.mu.Lock()
			n := 0
			for n < len(p.idle) {
				age := now.Sub(p.idle[n].last)
				if age <= p.idleFor && (len(p.idle)-n <= poolKeep || age <= p.sweepEvery) {
					break
				}
				n++
			}
			old := append([]*worker(nil), p.idle[:n]...)
			p.idle = append(p.idle[:0], p.idle[n:]...)
			p.mu.Unlock()
			for _, w := range old {
				w.ch <- nil
			}
			if p.retired += len(old); p.retired >= poolKeep && p.onRetire != nil {
				p.retired = 0
				p.onRetire()
			}
		}
	}
}

func (p *pool) stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.stopped = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.ch <- nil
	}
	close(p.quit)
	p.wg.Wait()
}
