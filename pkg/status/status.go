// Package status is HatRPC's status errors: an error with a code
// (pkg/status/codes), a message and details, which a handler returns and
// the caller gets back, whatever the route (TCP, THeader, lanes, FLOCK):
//
//	// handler
//	return nil, status.New(codes.NotFound, "no such user").WithDetails("user", id)
//
//	// caller
//	var st *status.Status
//	if errors.As(err, &st) && st.Code() == codes.NotFound { ... }
//	switch status.Code(err) { ... } // any error: context, overload, transport
//
// On the wire the reply is a standard TApplicationException carrying the
// message (an Apache Thrift peer sees an application exception with that
// text); the code and details ride the reply headers (HeaderCode,
// HeaderDetailPrefix), which HatRPC framing, lanes, FLOCK and THeader
// carry. Over plain framed/unframed Thrift only the exception travels,
// and Code derives the code from its type. See docs/errors.md.
package status

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
)

// Reply header keys of a status (THeader info headers between an Apache
// THeader peer and HatRPC carry them too).
const (
	// HeaderCode holds the code in decimal.
	HeaderCode = "hatrpc-status"
	// HeaderDetailPrefix starts the key of each detail: detail "user"
	// travels as "hatrpc-status-user".
	HeaderDetailPrefix = "hatrpc-status-"
)

// MaxDetailBytes bounds a status's details (keys plus values): a server
// sends the code without its details when they are larger, as reply
// headers must stay small (THeader's head is at most 256 KiB).
const MaxDetailBytes = 16 << 10

// Status is a status error. Details are key/value strings (reply headers
// are strings; encode bytes, e.g. base64, into a value). A *Status is
// immutable: WithDetails returns a new one.
type Status struct {
	code    codes.Code
	msg     string
	details map[string]string
	cause   error // what the client decoded (a *proto.ApplicationException), for errors.As
}

// New returns a status with code c and message msg.
func New(c codes.Code, msg string) *Status { return &Status{code: c, msg: msg} }

// Error returns a status error with code c and message msg (nil for OK).
func Error(c codes.Code, msg string) error {
	if c == codes.OK {
		return nil
	}
	return New(c, msg)
}

// Errorf is Error with a formatted message.
func Errorf(c codes.Code, format string, a ...any) error {
	return Error(c, fmt.Sprintf(format, a...))
}

// WithDetails returns a copy of s with the key/value pairs kv added
// (later values win; a trailing key without value is ignored).
func (s *Status) WithDetails(kv ...string) *Status {
	n := *s
	n.details = make(map[string]string, len(s.details)+len(kv)/2)
	maps.Copy(n.details, s.details)
	for i := 0; i+1 < len(kv); i += 2 {
		n.details[kv[i]] = kv[i+1]
	}
	return &n
}

// Code returns the status code.
func (s *Status) Code() codes.Code {
	if s == nil {
		return codes.OK
	}
	return s.code
}

// Message returns the message.
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return s.msg
}

// Details returns a copy of the details (nil if none).
func (s *Status) Details() map[string]string {
	if s == nil || len(s.details) == 0 {
		return nil
	}
	return maps.Clone(s.details)
}

// Detail returns one detail ("" if absent).
func (s *Status) Detail(key string) string {
	if s == nil {
		return ""
	}
	return s.details[key]
}

// Err returns s as an error, nil when s is nil or OK.
func (s *Status) Err() error {
	if s == nil || s.code == codes.OK {
		return nil
	}
	return s
}

func (s *Status) Error() string {
	return "status " + s.code.String() + ": " + s.msg
}

// Unwrap returns the application exception a client decoded the status
// from (nil for a status made by New), so code matching
// *proto.ApplicationException keeps working.
func (s *Status) Unwrap() error { return s.cause }

// Is matches a *Status target of the same code whose message is empty or
// equal: errors.Is(err, status.Error(codes.NotFound, "")).
func (s *Status) Is(target error) bool {
	t, ok := target.(*Status)
	return ok && t.code == s.code && (t.msg == "" || t.msg == s.msg)
}

// Outcome returns the code's metrics outcome label (proto.Outcome uses
// it).
func (s *Status) Outcome() string { return s.code.Label() }

// FromError returns the status err is or wraps, and false when there is
// none (Convert turns any error into one).
func FromError(err error) (*Status, bool) {
	var st *Status
	if errors.As(err, &st) {
		return st, true
	}
	return nil, false
}

// Convert returns err as a status: the status it wraps, or one whose code
// Code(err) gives and whose message is err's text (nil for nil).
func Convert(err error) *Status {
	if err == nil {
		return nil
	}
	if st, ok := FromError(err); ok {
		return st
	}
	msg := err.Error()
	var ae *proto.ApplicationException
	if errors.As(err, &ae) {
		msg = ae.Message
	}
	return &Status{code: Code(err), msg: msg}
}

// Code returns the code of any error: OK for nil; a status's own code;
// Canceled and DeadlineExceeded for the context's errors; ResourceExhausted
// for proto.ErrOverloaded; for another application exception (an Apache
// peer's, or any reply without status headers) UNKNOWN gives Unknown,
// UNKNOWN_METHOD and UNSUPPORTED_CLIENT_TYPE Unimplemented,
// VALIDATION_FAILED InvalidArgument, every other type Internal; any other
// error the code its StatusCode method gives (client.ConnError, a call
// that failed on its connection: Unavailable), Unknown otherwise.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var st *Status
	var ae *proto.ApplicationException
	var sc interface{ StatusCode() codes.Code }
	switch {
	case errors.As(err, &st):
		return st.code
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, proto.ErrOverloaded):
		return codes.ResourceExhausted
	case errors.As(err, &ae):
		return excCode(ae.Type)
	case errors.As(err, &sc):
		return sc.StatusCode()
	}
	return codes.Unknown
}

func excCode(t int32) codes.Code {
	switch t {
	case proto.ExcUnknown:
		return codes.Unknown
	case proto.ExcUnknownMethod, proto.ExcUnsupportedClientType:
		return codes.Unimplemented
	case proto.ExcValidationFailed:
		return codes.InvalidArgument
	}
	return codes.Internal
}

// Exception returns the TApplicationException a server sends for s:
// UNKNOWN for Unknown, UNKNOWN_METHOD for Unimplemented, VALIDATION_FAILED
// for InvalidArgument, INTERNAL_ERROR for every other code, with s's
// message, so a peer without the status headers derives the same code
// for the codes it can.
func (s *Status) Exception() *proto.ApplicationException {
	if ae, ok := s.cause.(*proto.ApplicationException); ok {
		return ae // the one it came in (a proxy passes it on unchanged)
	}
	t := proto.ExcInternalError
	switch s.code {
	case codes.Unknown:
		t = proto.ExcUnknown
	case codes.Unimplemented:
		t = proto.ExcUnknownMethod
	case codes.InvalidArgument:
		t = proto.ExcValidationFailed
	}
	return proto.NewApplicationException(t, s.msg)
}

// AppendHeaders returns md (a new MD if nil) with s's code and details
// as reply headers; details over MaxDetailBytes are left out. For
// transports.
func (s *Status) AppendHeaders(md metadata.MD) metadata.MD {
	if md == nil {
		md = make(metadata.MD, 1+len(s.details))
	}
	md[HeaderCode] = strconv.FormatUint(uint64(s.code), 10)
	n := 0
	for k, v := range s.details {
		n += len(k) + len(v)
	}
	if n <= MaxDetailBytes {
		for k, v := range s.details {
			md[HeaderDetailPrefix+k] = v
		}
	}
	return md
}

// FromReply returns the status of a reply that carried the application
// exception ae and reply headers md: the code and details of md when it
// has HeaderCode, nil otherwise (the caller then returns ae as it is). The
// status unwraps to ae. For transports.
func FromReply(ae *proto.ApplicationException, md metadata.MD) *Status {
	v, ok := md[HeaderCode]
	if !ok {
		return nil
	}
	c, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return nil // not ours: the exception as it is
	}
	st := &Status{code: codes.Code(c), msg: ae.Message, cause: ae}
	for k, v := range md {
		if d, ok := strings.CutPrefix(k, HeaderDetailPrefix); ok && d != "" {
			if st.details == nil {
				st.details = map[string]string{}
			}
			st.details[d] = v
		}
	}
	return st
}
