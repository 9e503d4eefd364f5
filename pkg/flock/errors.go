package flock

import (
	"errors"
	"fmt"
)

var (
	// ErrBadMessage matches every malformed-message decoding failure.
	ErrBadMessage = errors.New("flock: bad message")
	// ErrTornMessage is a message whose trailing canary does not match its
	// header: it is still being written (or was corrupted) and is never
	// delivered.
	ErrTornMessage = errors.New("flock: torn message")
	// ErrClosed is returned by calls on a closed connection or server.
	ErrClosed = errors.New("flock: closed")
	// ErrTooLarge is a request, response or memory operation that does not
	// fit the configured message or scratch size.
	ErrTooLarge = errors.New("flock: too large")
	// ErrNoHandler is the server's answer to an unregistered handler id.
	ErrNoHandler = errors.New("flock: no handler")
	// ErrNoActiveQP means the server has deactivated every QP of this
	// connection (it always leaves one active, so this is transient).
	ErrNoActiveQP = errors.New("flock: no active QP")
	// ErrBadRegion is a memory operation outside an attached region or
	// misaligned for an atomic.
	ErrBadRegion = errors.New("flock: bad remote region access")
	// ErrProtocol is a peer breaking the handshake or ring protocol.
	ErrProtocol = errors.New("flock: protocol error")

	errInactive = errors.New("flock: QP inactive")
)

// HandlerError carries the error text a server handler returned.
type HandlerError struct {
	Handler uint16
	Msg     string
}

func (e *HandlerError) Error() string { return fmt.Sprintf("flock: handler %d: %s", e.Handler, e.Msg) }

// QPError is a verbs failure that broke one QP of a connection; it wraps the
// rdma error so errors.Is(err, rdma.ErrFlushed) and friends work.
type QPError struct {
	QP  int
	Err error
}

func (e *QPError) Error() string { return fmt.Sprintf("flock: qp %d: %v", e.QP, e.Err) }
func (e *QPError) Unwrap() error { return e.Err }
