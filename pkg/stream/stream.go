// Package stream holds what HatRPC's client and server streams share: the
// streaming mode a function declares in its IDL and the errors a stream
// ends with. The streams themselves are client.Stream and
// server.ServerStream; docs/design/streams.md describes the wire and the
// flow control.
package stream

import (
	"errors"
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Mode is how a function streams, from its IDL annotation
// `(streaming.mode="...")`, the spelling Kitex uses for Thrift streaming.
type Mode uint8

const (
	// None is a unary function: one request, one reply.
	None Mode = iota
	// Client: the client sends many messages, the server replies once.
	Client
	// Server: the client sends one message, the server sends many.
	Server
	// Bidi: both sides send many, independently.
	Bidi
)

// AnnotationKey is the IDL annotation that declares a streaming function.
const AnnotationKey = "streaming.mode"

var modeNames = [...]string{None: "none", Client: "client", Server: "server", Bidi: "bidirectional"}

// String is the annotation's value for m ("none" for unary).
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("stream.Mode(%d)", uint8(m))
}

// ParseMode reads an annotation value: "client", "server" or
// "bidirectional" (Kitex's values; "unary" and "" are None).
func ParseMode(s string) (Mode, bool) {
	switch s {
	case "", "unary":
		return None, true
	case "client":
		return Client, true
	case "server":
		return Server, true
	case "bidirectional":
		return Bidi, true
	}
	return None, false
}

// ClientSends reports whether the client sends more than one message.
func (m Mode) ClientSends() bool { return m == Client || m == Bidi }

// ServerSends reports whether the server sends more than one message.
func (m Mode) ServerSends() bool { return m == Server || m == Bidi }

// ErrNeedsHatRPCPeer is what opening a stream returns on a connection
// whose peer did not negotiate HatRPC streams (a plain Apache Thrift
// server, a THeader or HTTP connection).
var ErrNeedsHatRPCPeer = errors.New("stream: streaming needs a HatRPC peer")

// TooLargeError is what SendMsg returns, on either side, for a message
// whose encoding would take Size bytes (its frame's payload: on the
// server a header block going with it counts) against a message limit of
// Limit bytes (proto.Limits.MaxMessageSize). The message is not built
// past the limit (its encoding stops there and only counts the rest) and
// nothing of it is sent, so the stream and its connection go on: a
// smaller message may follow. It matches proto.ErrSizeLimit (errors.Is).
type TooLargeError struct {
	Size, Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("stream: message of %d bytes exceeds the message limit of %d bytes", e.Size, e.Limit)
}

func (e *TooLargeError) Unwrap() error { return proto.ErrSizeLimit }
