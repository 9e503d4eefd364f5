package hs2

import (
	"errors"

	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

// SQLSTATE values of the statuses the server answers with.
const (
	sqlStateSyntax      = "42000" // the statement failed in the engine
	sqlStateUnsupported = "0A000" // a feature this server does not have
	sqlStateGeneral     = "HY000"
)

func okStatus() *tcli.TStatus { return &tcli.TStatus{StatusCode: tcli.TStatusCode_SUCCESS_STATUS} }

func errStatus(code tcli.TStatusCode, sqlState string, err error) *tcli.TStatus {
	msg := err.Error()
	ec := int32(0)
	return &tcli.TStatus{StatusCode: code, SqlState: &sqlState, ErrorCode: &ec, ErrorMessage: &msg}
}

// statusOf turns a server error into the status HiveServer2 clients read.
func statusOf(err error) *tcli.TStatus {
	var unsup *UnsupportedError
	switch {
	case errors.Is(err, ErrInvalidHandle):
		return errStatus(tcli.TStatusCode_INVALID_HANDLE_STATUS, sqlStateGeneral, err)
	case errors.Is(err, ErrTooMany):
		return errStatus(tcli.TStatusCode_ERROR_STATUS, sqlStateGeneral, err)
	case errors.As(err, &unsup):
		return errStatus(tcli.TStatusCode_ERROR_STATUS, sqlStateUnsupported, err)
	default:
		return errStatus(tcli.TStatusCode_ERROR_STATUS, sqlStateSyntax, err)
	}
}

// UnsupportedError names a HiveServer2 feature this server does not have.
type UnsupportedError struct{ What string }

func (e *UnsupportedError) Error() string { return "hs2: not supported: " + e.What }
