package proto

import (
	"context"
	"errors"
)

// Thrower is implemented by the generated result struct of every function
// that declares exceptions: ThrownException is the IDL name of the declared
// exception the result carries, "" when it carries none. Metrics label a
// call's outcome with it without knowing the generated types.
type Thrower interface {
	ThrownException() string
}

// ErrOverloaded is the exception a server answers a call with when the
// call was turned away before its handler ran because the function is over
// its rate limit (server.WithRateLimit). Callers recognise it with
// errors.Is(err, proto.ErrOverloaded); the call did not run, so it may be
// sent again later. On the wire it is an INTERNAL_ERROR with this message,
// which any Thrift client understands.
var ErrOverloaded error = &ApplicationException{Type: ExcInternalError, Message: "overloaded: rate limit exceeded; retry later"}

// Outcome label values shared by the server's and the client's metrics;
// a declared exception is labelled with its IDL type name instead.
const (
	OutcomeOK        = "ok"
	OutcomeDeadline  = "deadline"
	OutcomeCanceled  = "canceled"
	OutcomeOverload  = "overload"
	OutcomeTransport = "transport_error"
)

var excKinds = [...]string{
	"unknown", "unknown_method", "invalid_message_type", "wrong_method_name",
	"bad_sequence_id", "missing_result", "internal_error", "protocol_error",
	"invalid_transform", "invalid_protocol", "unsupported_client_type", "validation_failed",
}

// Outcomer is implemented by errors that name their own outcome label
// (pkg/status: the status code's label, a bounded set).
type Outcomer interface {
	Outcome() string
}

// Outcome names how a call ended: OutcomeOK, the declared exception's type
// name (res is a Thrower carrying one), the label of an error that is or
// wraps an Outcomer (a status error's code), OutcomeOverload, OutcomeDeadline,
// OutcomeCanceled, or the kind of a Thrift application exception in snake
// case ("internal_error", "unknown_method", ...). It returns "" for any
// other error, which the caller classifies (a transport error on the
// client, an internal error on the server).
func Outcome(res Struct, err error) string {
	if err == nil {
		if t, ok := res.(Thrower); ok {
			if n := t.ThrownException(); n != "" {
				return n
			}
		}
		return OutcomeOK
	}
	var ae *ApplicationException
	var oc Outcomer
	switch {
	case errors.As(err, &oc):
		return oc.Outcome()
	case errors.Is(err, ErrOverloaded):
		return OutcomeOverload
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeDeadline
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	case errors.As(err, &ae):
		if ae.Type >= 0 && int(ae.Type) < len(excKinds) {
			return excKinds[ae.Type]
		}
		return "application_error"
	}
	return ""
}
