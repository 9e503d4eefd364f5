package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

type engineServer struct {
	ln     net.Listener
	dev    *engineDevice
	ctx    context.Context // ends every connection's Serve
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (s *engineServer) Addr() string { return s.ln.Addr().String() }

// Serve listens on addr; every accepted connection brings its EngineSetup
// and gets its own server endpoint answering by the same protocol.
func (e Engine) Serve(_ context.Context, addr string) (Server, error) {
	dev, err := openEngineDevice(1)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = dev.release()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &engineServer{ln: ln, dev: dev, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *engineServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return // Stop closed the listener
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.dev.acquire()
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() { _ = s.dev.release() }()
			defer s.forget(conn)
			// A failed connection only fails its caller, which reports it.
			_ = s.serveConn(conn)
		}()
	}
}

func (s *engineServer) forget(conn net.Conn) {
	s.mu.Lock()
	delete(s.conns, conn)
	s.mu.Unlock()
	_ = conn.Close()
}

func (s *engineServer) serveConn(conn net.Conn) error {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	bctx, bcancel := context.WithTimeout(ctx, bootstrapTimeout)
	defer bcancel()
	stop := context.AfterFunc(bctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	setup, err := readSetup(conn)
	stop()
	if err != nil {
		return err
	}
	_ = conn.SetDeadline(time.Time{})
	ep, err := rdma.NewRPCEndpoint(s.dev.pd, setup.Config)
	if err != nil {
		return err
	}
	defer func() { _ = ep.Close() }()
	if err := ep.Bootstrap(bctx, conn); err != nil {
		return err
	}
	// The caller sends nothing after the bootstrap: EOF (or an error) on
	// the connection means it closed or died, and ends Serve.
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_, _ = io.Copy(io.Discard, conn)
		cancel()
	}()
	defer func() { _ = conn.Close(); <-watched }()

	h := func(req []byte) []byte {
		// Build the echo in the reply lease so Reply sends it without a
		// copy of its own; one copy either way, but this is the path a
		// real handler writing its response takes.
		out := ep.ReplyBuffer(len(req))
		if out == nil {
			return req
		}
		copy(out, req)
		return out
	}
	done := make(chan error, 1)
	// Not locked to its thread, busy or not: a polling endpoint yields to
	// the scheduler every 2 ms, and a locked goroutine's yield hands its P
	// to another thread and back (three futex wake-ups a yield in perf,
	// each on a CPU where a poller spins); unlocked, it stays on its thread.
	go func() { done <- ep.Serve(ctx, setup.Proto, h) }()
	err = <-done
	if ctx.Err() != nil {
		return nil // the caller left or the server stopped
	}
	return err
}

// Stop closes the listener and every connection, and waits for their
// endpoints to close.
func (s *engineServer) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.cancel()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	lerr := s.ln.Close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("bench: engine server stop: %w", ctx.Err())
	}
	if errors.Is(lerr, net.ErrClosed) {
		lerr = nil
	}
	return errors.Join(lerr, s.dev.release())
}

type engineCaller struct {
	dev   *engineDevice
	conn  net.Conn
	ep    *rdma.RPCEndpoint
	proto rdma.Protocol
	once  sync.Once
	err   error
}

// Echo sends payload through the request lease (the copy a caller makes
// into registered memory) and returns the response lease, valid until the
// next Echo.
func (c *engineCaller) Echo(ctx context.Context, payload []byte) ([]byte, error) {
	req := payload
	if buf := c.ep.RequestBuffer(len(payload)); buf != nil {
		copy(buf, payload)
		req = buf
	}
	return c.ep.Call(ctx, c.proto, req)
}

func (c *engineCaller) Close() error {
	c.once.Do(func() {
		c.err = errors.Join(c.ep.Close(), c.conn.Close(), c.dev.release())
	})
	return c.err
}

// Callers opens n endpoint pairs to the server at addr, all configured by
// Setup for this concurrency (payload size unknown here: see CallersFor).
func (e Engine) Callers(ctx context.Context, addr string, n int) ([]Caller, error) {
	return e.CallersFor(ctx, addr, n, 0)
}

// CallersFor is Callers for size-byte payloads: the planned system plans
// for the size.
func (e Engine) CallersFor(ctx context.Context, addr string, n, size int) (_ []Caller, err error) {
	setup := e.Setup(size, n)
	dev, err := openEngineDevice(1) // the opener's reference, dropped below
	if err != nil {
		return nil, err
	}
	out := make([]Caller, 0, n)
	defer func() {
		if err != nil {
			for _, c := range out {
				_ = c.Close()
			}
		}
		if rerr := dev.release(); err == nil {
			err = rerr
		}
	}()
	for len(out) < n {
		c, err := dialEngine(ctx, dev, addr, setup)
		if err != nil {
			return nil, fmt.Errorf("%s caller %d: %w", e.Name(), len(out), err)
		}
		out = append(out, c)
	}
	return out, nil
}

func dialEngine(ctx context.Context, dev *engineDevice, addr string, setup EngineSetup) (*engineCaller, error) {
	ctx, cancel := context.WithTimeout(ctx, bootstrapTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if err := writeSetup(conn, setup); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	ep, err := rdma.NewRPCEndpoint(dev.pd, setup.Config)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if err := ep.Bootstrap(ctx, conn); err != nil {
		_ = ep.Close()
		_ = conn.Close()
		return nil, err
	}
	dev.acquire()
	return &engineCaller{dev: dev, conn: conn, ep: ep, proto: setup.Proto}, nil
}

func init() {
	for _, p := range rdma.Protocols() {
		registerEngine(Engine{Proto: p})
	}
	registerEngine(Engine{Proto: rdma.ProtoRFP, RFPFetch: true})
	registerEngine(Engine{Planned: true})
}

func registerEngine(e Engine) {
	engineSystems[e.Name()] = e
	Register(e)
}
