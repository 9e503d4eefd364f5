// Package codes holds the status codes of HatRPC status errors
// (pkg/status). The fixed set is gRPC's, with the same numbers and
// meanings, so a service that knows one knows the other; numbers from
// User up are the service's own (business codes, as Kitex's biz status
// errors carry), travel the same way and are never given a meaning here.
package codes

import "strconv"

// Code is a status code. The zero value is OK.
type Code uint32

// The fixed codes (gRPC's numbering).
const (
	OK                 Code = 0  // not an error
	Canceled           Code = 1  // the caller cancelled the call
	Unknown            Code = 2  // an error with no more precise code
	InvalidArgument    Code = 3  // the arguments are wrong whatever the server's state
	DeadlineExceeded   Code = 4  // the deadline passed before the call completed
	NotFound           Code = 5  // a requested entity does not exist
	AlreadyExists      Code = 6  // the entity to create exists already
	PermissionDenied   Code = 7  // the caller may not do this
	ResourceExhausted  Code = 8  // a quota or rate limit is used up (overload)
	FailedPrecondition Code = 9  // the system is not in a state the call needs
	Aborted            Code = 10 // a concurrency conflict; retry at a higher level
	OutOfRange         Code = 11 // an argument is past a valid range
	Unimplemented      Code = 12 // the server does not implement the call
	Internal           Code = 13 // an invariant broke in the server (also: undeclared handler errors)
	Unavailable        Code = 14 // transient: the call may succeed if sent again
	DataLoss           Code = 15 // unrecoverable data loss or corruption
	Unauthenticated    Code = 16 // no valid credentials
)

// User is the first service-defined code: codes from User up have the
// meaning the service gives them. Codes between Unauthenticated and User
// are reserved.
const User Code = 1000

var names = [...]string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
	"Unauthenticated",
}

// labels are the metrics outcome labels of the fixed codes: snake case,
// except where the label predates status codes (deadline, overload,
// internal_error), so one outcome keeps one label.
var labels = [...]string{
	"ok", "canceled", "unknown", "invalid_argument", "deadline", "not_found",
	"already_exists", "permission_denied", "overload", "failed_precondition",
	"aborted", "out_of_range", "unimplemented", "internal_error", "unavailable", "data_loss",
	"unauthenticated",
}

// String returns the code's name ("NotFound"), "User(1001)" for a
// service's own code and "Code(20)" for a reserved one.
func (c Code) String() string {
	switch {
	case int(c) < len(names):
		return names[c]
	case c >= User:
		return "User(" + strconv.FormatUint(uint64(c), 10) + ")"
	}
	return "Code(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Label returns the code's metrics outcome label: the snake-case name of
// a fixed code, "user_code" for every service code and "unknown_code" for
// reserved ones, so the label set stays bounded whatever services send.
func (c Code) Label() string {
	switch {
	case int(c) < len(labels):
		return labels[c]
	case c >= User:
		return "user_code"
	}
	return "unknown_code"
}

// Retryable reports whether a call that failed with c may succeed if
// sent again unchanged: Unavailable only (the server could not take it).
// ResourceExhausted is not: sending again adds load where there is too
// much already; a client's retry budget is what lets overloaded calls
// through, not the code.
func (c Code) Retryable() bool { return c == Unavailable }
