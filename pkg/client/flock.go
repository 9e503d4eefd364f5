//go:build cgo && linux

package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/flock"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// With qp_sharing in a function's plan, its calls go through one FLOCK
// handle per server and process (pkg/flock): every Conn of the process to
// that server shares its few QPs, callers coalesce into one message per
// leader, and credits and the QP and goroutine schedulers apply. The
// handle is opened on first use like a lane (attach over TCP, the
// connection then its liveness link) and closed with its last Conn.

// sharedFlock is one FLOCK handle and who uses it.
type sharedFlock struct {
	key  string
	refs int // Conns holding it, under flocksMu

	fc     *flock.Conn
	link   *fastpath.Link
	dev    *fastpath.Device
	dead   context.Context // cancelled when the link breaks or the server drains
	kill   context.CancelFunc
	calls  sync.WaitGroup
	closed sync.Once
}

var (
	flocksMu sync.Mutex
	flocks   = map[string]*sharedFlock{}
)

// errFlockGone fails the calls in flight when the handle's peer goes away.
var errFlockGone = errors.New("flock handle closed: the server went away or drains")

// flockFor returns this Conn's reference to the process's handle for the
// server, attaching one when there is none (or the old one died).
func (c *Conn) flockFor(ctx context.Context, tr hints.Transport) (*sharedFlock, error) {
	c.mu.Lock()
	h := c.flock
	c.mu.Unlock()
	if h != nil && h.dead.Err() == nil {
		return h, nil
	}
	key := c.addr + "|" + tr.String()
	flocksMu.Lock()
	defer flocksMu.Unlock()
	sh := flocks[key]
	if sh == nil || sh.dead.Err() != nil {
		var err error
		if sh, err = c.openFlock(ctx, key, tr); err != nil {
			return nil, err
		}
		flocks[key] = sh
	}
	sh.refs++
	c.mu.Lock()
	old := c.flock
	c.flock = sh
	c.mu.Unlock()
	if old != nil && old.releaseLocked() {
		go old.close() // a dead handle: its calls are failing already
	}
	return sh, nil
}

// releaseLocked drops one reference and reports whether it was the last;
// flocksMu is held. The caller closes the handle then, outside the lock.
func (sh *sharedFlock) releaseLocked() bool {
	if sh.refs--; sh.refs > 0 {
		return false
	}
	if flocks[sh.key] == sh {
		delete(flocks, sh.key)
	}
	return true
}

func (c *Conn) releaseFlock() {
	c.mu.Lock()
	h := c.flock
	c.flock = nil
	c.mu.Unlock()
	if h == nil {
		return
	}
	flocksMu.Lock()
	last := h.releaseLocked()
	flocksMu.Unlock()
	if last {
		h.close()
	}
}

func (sh *sharedFlock) close() {
	sh.closed.Do(func() {
		sh.kill()
		sh.calls.Wait()
		_ = sh.fc.Close()
		sh.link.Close()
		sh.dev.Release()
	})
}

// openFlock attaches a new handle: a TCP connection whose hello asks for
// the FLOCK attach, then flock.Dial over it.
func (c *Conn) openFlock(ctx context.Context, key string, tr hints.Transport) (_ *sharedFlock, err error) {
	dctx, cancel := context.WithTimeout(ctx, c.o.dialTimeout)
	defer cancel()
	d, err := c.acquire(dctx, tr)
	if err != nil {
		return nil, c.setupFailed("flock", tr, err)
	}
	defer func() {
		if err != nil {
			d.Release()
		}
	}()
	nc, br, rep, exc, err := c.attach(dctx, &wire.Attach{Transport: tr.String(), Function: fastpath.FlockFunction})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			nc.Close()
		}
	}()
	if exc != nil && budgetRefusal(exc.Message) {
		return nil, c.setupFailed("flock", tr, fmt.Errorf("refused by the server: %s", exc.Message))
	}
	if exc != nil || rep.Caps&wire.CapAttach == 0 {
		return nil, errNoLane
	}
	fc, err := flock.Dial(dctx, d.Device, wire.BufConn(nc, br),
		flock.WithMaxMessage(fastpath.FlockMaxMessage), flock.WithRingSize(fastpath.FlockRing),
		flock.WithMaxReply(c.o.limits.MaxMessageSize+wire.HeaderSize))
	if err != nil {
		if ctx.Err() != nil {
			return nil, &ConnError{Op: "flock", Err: err}
		}
		return nil, c.setupFailed("flock", tr, err)
	}
	dead, kill := context.WithCancelCause(context.Background())
	sh := &sharedFlock{key: key, fc: fc, dev: d, dead: dead, kill: func() {
		kill(errFlockGone)
		fc.Abort()
	}}
	sh.link = fastpath.Watch(nc, sh.kill, sh.kill)
	c.lanes.setUp()
	return sh, nil
}

// flockRoute sends a function's calls through the process's FLOCK handle
// (the route of a function planned with qp_sharing, and the overflow of
// one with qp_sharing=auto). A call too large to share goes on to the
// function's lane pool, and one that finds no FLOCK to TCP or the pool,
// with the bytes encoded here.
type flockRoute struct{ p *lanePool }

func (f flockRoute) call(ctx context.Context, req request, result proto.Struct) error {
	p := f.p
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return errDeadlineNotSent
		}
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	bp := wire.GetBuf()
	defer wire.PutBuf(bp)
	b, err := p.appendFrame(ctx, codec, (*bp)[:wire.HeaderSize], &req, nil, timeout)
	*bp = b
	if err != nil {
		return err
	}
	req.frame = b
	p.noteReq(len(b))
	return f.callFrame(ctx, req, bp, codec, result)
}

// callFrame sends req.frame, encoded in the pooled buffer bp (which the
// reply may reuse), through the handle.
func (f flockRoute) callFrame(ctx context.Context, req request, bp *[]byte, codec *wire.Codec, result proto.Struct) error {
	p := f.p
	c := p.ls.c
	b := req.frame
	req.fromFLOCK = true
	if int64(len(b)) > p.flockMax { // past the table's FLOCK rows: a lane
		return p.call(ctx, req, result)
	}
	sh, err := c.flockFor(ctx, p.tr)
	if err == errNoLane {
		if c.lanes.isOff() {
			return tcpRoute{c}.call(ctx, req, result) // the fast path fell back to TCP
		}
		return p.call(ctx, req, result)
	}
	if err != nil {
		return err
	}
	if err = c.flockCall(ctx, sh, bp, &req, codec, result); err == nil {
		p.calls[flockSlot].Add(1)
		if req.use != nil {
			err = req.use() // on the reply in place: bp is released after this returns
		}
	}
	return err
}

// flockCall runs the call frame req.frame (in the pooled buffer bp) on
// the handle; a borrower's reply (req.use) is decoded in place (see
// decodeFrame).
func (c *Conn) flockCall(ctx context.Context, sh *sharedFlock, bp *[]byte, req *request, codec *wire.Codec, result proto.Struct) error {
	b := req.frame
	sh.calls.Add(1)
	defer sh.calls.Done()
	if sh.dead.Err() != nil {
		return &ConnError{Op: "flock", Err: context.Cause(sh.dead)}
	}
	// A call waits for its response until ctx ends; the handle's death
	// aborts it too (flock.Conn.Abort), so a vanished server means an
	// error, not a hang, without a derived context per call.
	// The reply lands in the request's pooled buffer (the request is read
	// no more by then; the decode copies what it keeps).
	resp, err := sh.fc.CallAppend(ctx, flockHandler, b, b[:0])
	if cap(resp) > cap(b) {
		*bp = resp[:0]
	}
	if err != nil {
		if cerr := ctxFailure(ctx); cerr != nil {
			return cerr
		}
		var he *flock.HandlerError
		if errors.As(err, &he) {
			return proto.NewApplicationException(proto.ExcInternalError, he.Msg)
		}
		if errors.Is(err, flock.ErrClosed) && sh.dead.Err() != nil {
			err = fmt.Errorf("%w: %w", err, context.Cause(sh.dead))
		}
		sh.kill()
		return &ConnError{Op: "flock", Err: err}
	}
	if req.oneway {
		return nil
	}
	return c.decodeFrame(ctx, "flock", codec, resp, result, req.binaries())
}

// flockHandler is the FLOCK handler id of HatRPC frames (pkg/server).
const flockHandler = 0
