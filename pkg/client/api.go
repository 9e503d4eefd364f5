// Package client is the HatRPC runtime's client side. A Conn speaks plain
// Thrift to any Thrift server, finding its framing and protocol by itself,
// and upgrades itself to the multiplexed HatRPC framing when the peer is a
// HatRPC server (see docs/design/wire.md). Dialled with an http:// or
// https:// URL, it speaks Thrift over HTTP instead: one POST per call.
package client

import (
	"context"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// Method identifies the function a call invokes.
type Method struct {
	Service, Name string
	Oneway        bool
	Hints         *hints.Function
	// Stream is how the function streams (stream.None: unary); a
	// streaming function is opened with Streamer.NewStream, not called.
	Stream stream.Mode
}

// Streamer is a Caller that opens streams (*Conn).
type Streamer interface {
	// NewStream opens a stream of the streaming function m. final is the
	// function's result struct: the server's closing message is decoded
	// into it (the single reply of a client stream, or a declared
	// exception), after which RecvMsg returns io.EOF.
	NewStream(ctx context.Context, m *Method, final proto.Struct) (Stream, error)
}

// Stream is one open stream, as gRPC-Go's ClientStream: SendMsg and
// RecvMsg may run on two goroutines at once, but each on one only.
type Stream interface {
	// Context is the stream's context: it ends when the stream does.
	Context() context.Context
	// Header waits for the server's header metadata (sent before its
	// first message, or with its closing message).
	Header() (metadata.MD, error)
	// Trailer is the server's trailer metadata, complete once RecvMsg has
	// returned a non-nil error.
	Trailer() metadata.MD
	// SendMsg sends one message; it blocks while the peer's window is
	// full. After the stream ended it returns the stream's error (io.EOF
	// when the server ended it cleanly: RecvMsg says how). A message past
	// the message limit (WithLimits; on a lane no more than the lane
	// carries, fastpath.MaxMessage) is not sent: *stream.TooLargeError,
	// and the stream goes on.
	SendMsg(msg proto.Struct) error
	// RecvMsg decodes the next message into msg; io.EOF once the server
	// ended the stream cleanly (final decoded), else the stream's error.
	RecvMsg(msg proto.Struct) error
	// CloseSend ends the client's side; the server's RecvMsg sees io.EOF.
	CloseSend() error
}

// Invoker performs a call; interceptors receive the next one in the chain.
type Invoker func(ctx context.Context, m *Method, args, result proto.Struct) error

// Interceptor wraps a call; interceptors run in the order they were given,
// the first one outermost.
type Interceptor func(ctx context.Context, m *Method, args, result proto.Struct, next Invoker) error
