package server

import (
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// request is one decoded-enough call, handed from the reader to a handler.
type request struct {
	replyTo // where its reply goes (name: m's)
	m       *method
	buf     *[]byte
	body    []byte
	oneway  bool
	timeout time.Duration
	// turn: a plain connection's call runs once every call read before
	// it on the connection has (ordered; order.go).
	turn    uint64
	ordered bool
	ctx     *callCtx             // nil: the connection's context is the call's
	size    int                  // request message bytes
	tr      uint8                // transport index into method.stats
	sc      *metadata.ServerCall // the call's headers; nil when it sent none or only rid
	// rid: the call's request id when it was all its headers (hasRID;
	// callCtx.rid), for the server's log lines after its context ended.
	rid    [wire.RequestIDSize]byte
	hasRID bool
	// at: when it started (since epoch); 0: execute reads the clock. A
	// TCP call's is the clock read that gave its deadline, as the frame
	// was parsed, unless it then waited (for memory, a slot or its turn):
	// the handler's latency excludes the wait.
	at time.Duration
	// end: when its handler returned (execute's clock read for the
	// latency), so the inline caller times the call without a read of
	// its own.
	end  time.Duration
	args proto.Struct // set: the arguments to decode into (with call), else execute makes them
	call any          // NewCall's value for HandleCall; nil: Handle runs
	// lease: body is a lane's lease (the engine's buffer, or FLOCK's ring
	// slot or task copy), valid until the reply is encoded and sent: a
	// borrow_args method's arguments may alias it as they alias buf.
	lease bool
	cold  *coldPlace // a cold call's place (replygate.go); nil: none
	conn  *conn      // set for a call whose handler may ReserveReply (replyroom.go)
	// replyMax is ReserveReply's message limit when lower than the
	// server's: a lane's maximum, or what its batch's frame has left
	// (lanereply.go); 0: the server's.
	replyMax int
	// meter: a dedicated lane's, which counts the call (frame: its
	// request frame's bytes) instead of the method's metric children;
	// execute leaves the handler's result and error in res and err and
	// the context live: the lane ends the call once the reply is out
	// (afterReply).
	meter *laneMeter
	frame int
	res   proto.Struct
	err   error
}

var reqPool = sync.Pool{New: func() any { return new(request) }}

// releaseCtx ends the call's own context; the reader forgets it for
// Cancel frames later (cancelTable).
func (c *conn) releaseCtx(r *request) {
	if r.ctx == nil {
		return
	}
	if r.sc == nil && r.hasRID {
		// Headers its handler made from the request id (and may have
		// set reply headers on) go with the reply.
		r.sc = r.ctx.sc.Load()
	}
	r.ctx.release()
	r.ctx = nil
}

func (c *conn) freeRequest(r *request) {
	c.clearRequest(r)
	reqPool.Put(r)
}

// clearRequest gives back what r holds and zeroes it for reuse.
func (c *conn) clearRequest(r *request) {
	c.releaseCtx(r)
	if r.buf != nil {
		wire.PutBuf(r.buf)
	}
	if r.mem > 0 {
		c.s.budget.release(c, r.mem)
	}
	c.dropCold(r)
	*r = request{}
}

// kit is what one goroutine's turn at serving a connection (a call to
// serve) reuses from call to call instead of taking it from the pools
// for each: a codec, and the request of the call it ran last.
type kit struct {
	codec *wire.Codec
	req   *request
	// in is the request buffer of the call run last, kept for the next
	// request read (takeIn): with the codec's spare for replies, a call
	// run inline takes no buffer from the pool (four pool operations, ~400
	// of a 64-caller 512 B call's ~10,800 instructions with the client's,
	// scripts/insn-ab.sh).
	in wire.Spare
	// call is a reset call value of method callOf, kept from the call
	// run last for the next of its method (takeCallKept).
	call   any
	callOf *method
	// ended is when the call run inline last ended (its handler's end,
	// since epoch), for the next call read whole right after it; 0: the
	// read role waited or moved since (serve clears it each message).
	ended time.Duration
}

// takeIn returns an empty buffer to read a request into.
func (k *kit) takeIn() *[]byte { return k.in.Get() }

// keepIn takes r's buffer, if it is a small one, for the next request
// read; r's reply must be out (its arguments may be borrowed from it).
func (k *kit) keepIn(r *request) {
	if k.in.Hold(r.buf) {
		r.buf = nil
	}
}

func (k *kit) getCodec() *wire.Codec {
	if k.codec == nil {
		k.codec = wire.GetCodec()
	}
	return k.codec
}

// take returns a request to fill in.
func (k *kit) take() *request {
	if r := k.req; r != nil {
		k.req = nil
		return r
	}
	return reqPool.Get().(*request)
}

// keep takes back r, cleared, for the next call.
func (k *kit) keep(r *request) {
	if k.req == nil {
		k.req = r
		return
	}
	reqPool.Put(r)
}

func (k *kit) done() {
	if k.codec != nil {
		wire.PutCodec(k.codec)
	}
	if k.req != nil {
		reqPool.Put(k.req)
	}
	k.in.Release()
	if k.call != nil {
		k.callOf.calls.Put(k.call)
	}
	*k = kit{}
}
