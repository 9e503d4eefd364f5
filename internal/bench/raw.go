package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Raw is the physical floor of an echo over loopback TCP with Go's net
// package: no Thrift, no framing beyond a 4-byte length, preallocated
// buffers and no allocation per call. Its numbers are the ceiling any
// TCP RPC system can reach here, so reports show the RPC systems as a
// fraction of it; it is never part of a verdict.
//
// Without Shared every caller has its own connection with one call in
// flight (like the Apache systems); the server reads a request and writes
// it back from the same buffer. With Shared all callers pipeline over one
// connection (like hatrpc): requests carry an 8-byte header (length, id),
// the server echoes the byte stream in whatever chunks it reads, and one
// client goroutine reads replies straight into the waiting caller's buffer.
//
// Batched is the floor of hatrpc's own layout for small calls: callers
// spread over rawBatchConns connections, frames queued through the same
// coalescing wire.Writer hatrpc uses (one write for the frames of all
// callers that arrive while one is written) and replies read through a
// 256 KiB buffer, so a read brings many of them. It is what batching alone
// buys, without Thrift or a single allocation per call.
type Raw struct {
	Shared  bool
	Batched bool
}

// rawBatchConns matches hatrpc's connections for calls under 64 KiB.
const rawBatchConns = 4

// Name is "raw-tcp", "raw-tcp-1conn" or "raw-tcp-batch".
func (r Raw) Name() string {
	switch {
	case r.Batched:
		return "raw-tcp-batch"
	case r.Shared:
		return "raw-tcp-1conn"
	}
	return "raw-tcp"
}

// rawHdr is the per-conn request header: a big-endian length; rawMuxHdr
// adds the caller id on a shared connection.
const (
	rawHdr    = 4
	rawMuxHdr = 8
)

// errRawTooLarge refuses lengths beyond the cap every system runs with.
var errRawTooLarge = errors.New("bench: raw frame too large")

type rawServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (s *rawServer) Addr() string { return s.ln.Addr().String() }

func (s *rawServer) Stop(ctx context.Context) error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("raw server stop: %w", ctx.Err())
	}
}

// serveRaw accepts connections on addr and serves each with serve on
// its own goroutine until Stop.
func serveRaw(addr string, serve func(net.Conn)) (Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &rawServer{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				serve(c)
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				_ = c.Close()
			}()
		}
	}()
	return s, nil
}

// Serve starts the raw echo server on addr.
func (r Raw) Serve(_ context.Context, addr string) (Server, error) {
	if r.Shared {
		return serveRaw(addr, rawStreamEcho)
	}
	return serveRaw(addr, rawServeConn)
}

// rawServeConn answers one request at a time: the first read usually
// brings the whole request (the client writes it with one writev), the
// reply leaves with one write from the same buffer.
func rawServeConn(c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := io.ReadAtLeast(c, buf, rawHdr)
		if err != nil {
			return
		}
		size := int(binary.BigEndian.Uint32(buf))
		if size > maxMessage {
			return
		}
		total := rawHdr + size
		if total > len(buf) {
			nb := make([]byte, total)
			copy(nb, buf[:n])
			buf = nb
		}
		if n < total {
			if _, err := io.ReadFull(c, buf[n:total]); err != nil {
				return
			}
		}
		if _, err := c.Write(buf[:total]); err != nil {
			return
		}
	}
}

// rawStreamEcho writes back whatever it reads: replies are the requests'
// bytes in the same order, so nothing needs parsing, and a read that
// brought many pipelined requests is answered by one write.
func rawStreamEcho(c net.Conn) {
	buf := make([]byte, 256<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// rawCaller owns one connection and its buffers.
type rawCaller struct {
	c    net.Conn
	hdr  [rawHdr]byte
	bufs [2][]byte
	rep  []byte
}

func (c *rawCaller) Echo(ctx context.Context, payload []byte) ([]byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.c.SetDeadline(dl)
	}
	binary.BigEndian.PutUint32(c.hdr[:], uint32(len(payload)))
	// writev of header and payload: no copy of the payload into a frame.
	c.bufs = [2][]byte{c.hdr[:], payload}
	v := net.Buffers(c.bufs[:])
	if _, err := v.WriteTo(c.c); err != nil {
		return nil, err
	}
	if cap(c.rep) < rawHdr+len(payload) {
		c.rep = make([]byte, rawHdr+len(payload))
	}
	rep := c.rep[:rawHdr+len(payload)]
	// One request is in flight, so reading ahead cannot eat a later reply.
	if _, err := io.ReadFull(c.c, rep); err != nil {
		return nil, err
	}
	if int(binary.BigEndian.Uint32(rep)) != len(payload) {
		return nil, fmt.Errorf("%w: raw length %d", ErrEchoMismatch, binary.BigEndian.Uint32(rep))
	}
	return rep[rawHdr:], nil
}

func (c *rawCaller) Close() error { return c.c.Close() }

// Callers dials one connection per caller, or one shared connection.
func (r Raw) Callers(ctx context.Context, addr string, n int) ([]Caller, error) {
	if r.Batched {
		return rawBatchCallers(ctx, addr, n)
	}
	if r.Shared {
		return rawMuxCallers(ctx, addr, n, false)
	}
	out := make([]Caller, 0, n)
	for i := 0; i < n; i++ {
		c, err := rawDial(ctx, addr)
		if err != nil {
			_ = CloseAll(out)
			return nil, err
		}
		out = append(out, &rawCaller{c: c})
	}
	return out, nil
}

func rawDial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raw dial %s: %w", addr, err)
	}
	return c, nil
}

// rawMux is the shared pipelined connection of raw-tcp-1conn.
type rawMux struct {
	rawLink
	r    io.Reader    // c, or a buffer over it (batched)
	w    *wire.Writer // nil: one writev per call under wmu
	wmu  sync.Mutex
	mu   sync.Mutex
	call []*rawMuxCaller // by id
}

// rawLink is a connection shared by callers, as they see it: the
// connection, and its reader's exit and why.
type rawLink struct {
	c    net.Conn
	done chan struct{} // closed when the reader exits
	err  error         // why the reader exited; read after done
}

// await waits for ready (the caller's reply is in), the reader's exit or
// the end of ctx.
func (l *rawLink) await(ctx context.Context, ready <-chan struct{}) error {
	select {
	case <-ready:
		return nil
	case <-l.done:
		return fmt.Errorf("raw reader: %w", l.err)
	case <-ctx.Done():
		// The reply may still arrive into the caller's buffer; a caller
		// is not used again once its context ends (the run is over).
		return ctx.Err()
	}
}

// closeBy closes the connection for its owner (the first of its
// callers), waiting for the reader; the others close nothing.
func (l *rawLink) closeBy(owner bool) error {
	if !owner {
		return nil
	}
	err := l.c.Close()
	<-l.done
	return err
}

type rawMuxCaller struct {
	m     *rawMux
	id    uint32
	hdr   [rawMuxHdr]byte
	bufs  [2][]byte
	frame []byte // batched: header and payload, queued with one Write
	rep   []byte
	ready chan struct{}
	owner bool
}

func rawMuxCallers(ctx context.Context, addr string, n int, batched bool) ([]Caller, error) {
	c, err := rawDial(ctx, addr)
	if err != nil {
		return nil, err
	}
	m := &rawMux{rawLink: rawLink{c: c, done: make(chan struct{})}, r: c, call: make([]*rawMuxCaller, n)}
	if batched {
		m.r = bufio.NewReaderSize(c, 256<<10)
		m.w = wire.NewWriter(c, nil)
	}
	out := make([]Caller, n)
	for i := range out {
		mc := &rawMuxCaller{m: m, id: uint32(i), ready: make(chan struct{}, 1), owner: i == 0}
		m.call[i] = mc
		out[i] = mc
	}
	go m.read()
	return out, nil
}

// read delivers replies: header first, then the payload straight into the
// caller's reply buffer (io.ReadFull on the conn, no intermediate copy).
func (m *rawMux) read() {
	defer close(m.done)
	var hdr [rawMuxHdr]byte
	for {
		if _, err := io.ReadFull(m.r, hdr[:]); err != nil {
			m.err = err
			return
		}
		size := int(binary.BigEndian.Uint32(hdr[:]))
		id := binary.BigEndian.Uint32(hdr[4:])
		if id >= uint32(len(m.call)) || size > maxMessage {
			m.err = errRawTooLarge
			return
		}
		mc := m.call[id]
		if cap(mc.rep) < size {
			mc.rep = make([]byte, size)
		}
		mc.rep = mc.rep[:size]
		if _, err := io.ReadFull(m.r, mc.rep); err != nil {
			m.err = err
			return
		}
		mc.ready <- struct{}{}
	}
}

func (c *rawMuxCaller) Echo(ctx context.Context, payload []byte) ([]byte, error) {
	var err error
	if c.m.w != nil {
		c.frame = binary.BigEndian.AppendUint32(c.frame[:0], uint32(len(payload)))
		c.frame = binary.BigEndian.AppendUint32(c.frame, c.id)
		c.frame = append(c.frame, payload...)
		err = c.m.w.Write(c.frame)
	} else {
		binary.BigEndian.PutUint32(c.hdr[:], uint32(len(payload)))
		binary.BigEndian.PutUint32(c.hdr[4:], c.id)
		c.bufs = [2][]byte{c.hdr[:], payload}
		v := net.Buffers(c.bufs[:])
		c.m.wmu.Lock()
		_, err = v.WriteTo(c.m.c)
		c.m.wmu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	if err := c.m.await(ctx, c.ready); err != nil {
		return nil, err
	}
	return c.rep, nil
}

func (c *rawMuxCaller) Close() error { return c.m.closeBy(c.owner) }

// rawBatchCallers spreads n callers round-robin over rawBatchConns
// batched connections.
func rawBatchCallers(ctx context.Context, addr string, n int) ([]Caller, error) {
	return spreadCallers(ctx, addr, n, func(ctx context.Context, addr string, share int) ([]Caller, error) {
		return rawMuxCallers(ctx, addr, share, true)
	})
}

// spreadCallers spreads n callers round-robin over rawBatchConns
// connections, each opened with its share of callers by open (callers k,
// k+conns, ... on the k-th); on an error the ones opened are closed.
func spreadCallers(ctx context.Context, addr string, n int, open func(ctx context.Context, addr string, share int) ([]Caller, error)) ([]Caller, error) {
	conns := min(n, rawBatchConns)
	out := make([]Caller, n)
	var all []Caller
	for k := 0; k < conns; k++ {
		share := (n - k + conns - 1) / conns
		cs, err := open(ctx, addr, share)
		if err != nil {
			_ = CloseAll(all)
			return nil, err
		}
		all = append(all, cs...)
		for j, c := range cs {
			out[k+j*conns] = c
		}
	}
	return out, nil
}

func init() {
	Register(Raw{})
	Register(Raw{Shared: true})
	Register(Raw{Shared: true, Batched: true})
}
