// Package server is the HatRPC runtime's server side: one listener serves
// plain Apache Thrift clients (framed or unframed, binary or compact, detected
// per connection) and HatRPC clients that upgraded through the capability
// handshake to the multiplexed HatRPC framing (see docs/design/wire.md),
// and Thrift over HTTP: POSTs on the same port, or HTTPHandler in a mux.
//
// # A reply's room
//
// A reply may take at most its room: the message limit (WithLimits; on a
// lane, what the lane carries; in a lane's batch, what the batch has
// left) and, with a memory budget (WithMemoryBudget), what the
// connection's share has free. The server bounds what it builds itself:
// a reply past its room is not encoded past it (binary and compact count
// the rest without copying it, JSON stops at it), and the call gets an
// INTERNAL_ERROR exception naming the sizes instead. It cannot bound
// what a handler allocates before it returns: a handler whose result may
// be large asks ReplyRoom how much fits, reserves as it builds
// (ReserveReply, which never waits) and cuts its answer, saying so,
// where the room ends, as hatkv's Scan does.
package server

import (
	"context"
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// Handler runs one call. For oneway methods the result is ignored.
type Handler func(ctx context.Context, args proto.Struct) (proto.Struct, error)

// Method is one function of a service as generated code registers it.
type Method struct {
	Name    string // IDL name, as on the wire
	Oneway  bool
	NewArgs func() proto.Struct
	Handle  Handler // for oneway the result is ignored
	Hints   *hints.Function

	// NewCall and HandleCall, when both are set, run a call in place of
	// NewArgs and Handle: NewCall returns the arguments to decode into
	// and a value HandleCall then gets, which may hold more than them
	// (generated code: the arguments and the result, allocated together).
	// A call whose arguments an interceptor replaced runs Handle.
	//
	// reuse, when not nil, is a call value this NewCall returned before,
	// whose call has ended (its reply is encoded) and that nothing holds
	// any more: NewCall may reset it and return it again rather than
	// allocate. A lane, which runs one call at a time, passes its last
	// call's, unless interceptors (which may keep arguments and results)
	// run.
	NewCall    func(reuse any) (args proto.Struct, call any)
	HandleCall func(ctx context.Context, call any) (proto.Struct, error)

	// Stream is how the function streams; for a streaming function
	// HandleStream runs in place of NewArgs and Handle.
	Stream       stream.Mode
	HandleStream StreamHandler
}

// StreamHandler runs one stream. final is the function's result struct
// sent as the stream's closing message (the client stream's single reply,
// or a declared exception); nil final with a nil error ends the stream
// cleanly. Errors are mapped as a unary handler's (docs/design/wire.md §4).
type StreamHandler func(ctx context.Context, s ServerStream) (final proto.Struct, err error)

// ServerStream is the server's side of one stream, as gRPC-Go's
// ServerStream: SendMsg and RecvMsg may run on two goroutines at once,
// but each on one only.
type ServerStream interface {
	// Context is the stream's context: canceled when the client cancels
	// or goes, or its deadline passes.
	Context() context.Context
	// SendHeader sends header metadata now (else it goes with the first
	// message or the closing one). A header block past the message limit
	// is not sent: *stream.TooLargeError, and nothing changes (a smaller
	// header may follow).
	SendHeader(md metadata.MD) error
	// SetTrailer adds metadata sent with the closing message. The final
	// gets the room the trailer leaves under the message limit; a
	// trailer past the limit on its own is not sent, and the stream ends
	// with an INTERNAL_ERROR exception naming its size in place of the
	// final.
	SetTrailer(md metadata.MD)
	// SendMsg sends one message; it blocks while the client's window is
	// full. A message past the message limit (WithLimits; on a lane no
	// more than the lane carries, fastpath.MaxMessage) is not sent:
	// *stream.TooLargeError, and the stream goes on.
	SendMsg(msg proto.Struct) error
	// RecvMsg decodes the client's next message into msg; io.EOF once the
	// client closed its side.
	RecvMsg(msg proto.Struct) error
}

// Service is a set of methods registered under one (multiplexing) name.
type Service struct {
	Name    string
	Methods []Method
	Hints   *hints.Service
}

// CallInfo describes the call an interceptor wraps.
type CallInfo struct {
	Service   string
	Method    *Method
	Seqid     int32
	Transport string // TransportTCP, TransportThrift, TransportSHM or TransportRDMA
	// Protocol is the Thrift protocol of the call's messages.
	Protocol proto.Protocol
	Remote   string
	Deadline time.Time // zero when the client sent none
}

// Transport label values used in CallInfo and in metrics.
const (
	TransportTCP    = "tcp"    // HatRPC framing over TCP
	TransportThrift = "thrift" // plain Apache Thrift over TCP
	TransportSHM    = "shm"    // a lane of the HatRPC engine on the shm provider
	TransportRDMA   = "rdma"   // a lane of the HatRPC engine on an RDMA NIC
)

// Interceptor wraps a handler; interceptors run in the order they were given,
// the first one outermost.
type Interceptor func(ctx context.Context, info *CallInfo, args proto.Struct, next Handler) (proto.Struct, error)
