package wire

import (
	"errors"
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// MinMessageSize is the smallest message limit (proto.Limits.MaxMessageSize)
// a server or a client accepts: below it the messages the protocol itself
// makes may not fit, and a peer takes a frame past its limit for a broken
// connection. Server.Serve and client.Dial refuse a smaller limit
// (MessageLimitError) rather than fail later where it is hard to tell why:
// under about 100 bytes the client's hello did not fit and Dial failed
// with "not a Thrift server"; under 64 KiB every lane failed to be made.
//
// What must fit, and why 4 KiB does:
//   - The exception a call gets in place of a reply that cannot be sent
//     (server: reply.go): its text is at most 164 bytes, and its
//     message repeats the call's method name; it fits whole for names of up
//     to about 3.8 KB, and a longer name leaves it less text (the call is
//     still answered, the server's appendRefused). A lane's batch answers
//     each call with at most 256 bytes (server: batchExcMax).
//   - The hello: 95 bytes, and 35 more and the name for each function the
//     client plans (with hints). It and its reply have a bound of their
//     own (MaxHelloSize), so a client with more functions than fit the
//     limit still reaches the server; a lane's attach hello is under 200
//     bytes and the hello reply under 100 (without stream windows).
//   - Stream control frames: a window grant or a cancel is a header of 20
//     bytes and a few fields; an open carries the method name and the
//     caller's headers, a reset an exception text as above.
//   - A lane's eager slot (hints.DefaultEagerThreshold, 4 KiB): smaller
//     messages go in one send.
const MinMessageSize = 4 << 10

// ErrMessageLimit is matched (errors.Is) by a MessageLimitError.
var ErrMessageLimit = errors.New("message limit below the protocol's minimum")

// MessageLimitError is the error of a message limit below MinMessageSize.
type MessageLimitError struct {
	Limit int // the limit given, in bytes
}

func (e *MessageLimitError) Error() string {
	return fmt.Sprintf("a message limit of %d bytes is below the protocol's minimum of %d bytes (the hello, refusals and stream control frames must fit)",
		e.Limit, MinMessageSize)
}

func (e *MessageLimitError) Is(target error) bool { return target == ErrMessageLimit }

// CheckMessageLimit returns a *MessageLimitError when n is below
// MinMessageSize.
func CheckMessageLimit(n int) error {
	if n < MinMessageSize {
		return &MessageLimitError{Limit: n}
	}
	return nil
}

// MaxHelloSize bounds the hello and its reply whatever the message limit:
// a hello lists the client's plan for each function it has hints for (35
// bytes and the name each), which at a limit near MinMessageSize left a
// client of more than about 75 such functions unable to dial. 64 KiB holds
// the plans of about 1,200 functions of 16-byte names; a client with more
// sends the plans that fit (the server checks the others when their lanes
// are attached). Only a connection's first message may be this large: any
// other past the limit is refused as before. It is the size under which a
// read is not charged to the memory budget (ChargeMin), so what a pending
// handshake may hold is what any unread frame under the budget's notice
// could.
const MaxHelloSize = ChargeMin

// HelloLimits are the decoder limits of a hello and of its reply: l (the
// defaults if nil) with the message size, string length and container
// size raised to MaxHelloSize where they are smaller.
func HelloLimits(l *proto.Limits) proto.Limits {
	if l == nil {
		l = &proto.DefaultLimits
	}
	h := *l
	h.MaxMessageSize = max(h.MaxMessageSize, MaxHelloSize)
	h.MaxStringLength = max(h.MaxStringLength, MaxHelloSize)
	h.MaxContainerSize = max(h.MaxContainerSize, MaxHelloSize)
	return h
}
