package server

import (
	"context"
	"errors"
	"strconv"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
)

// failReply turns a failed call's error (nil: the handler returned no
// result) into the application exception the reply carries, and, for a
// status error, an undeclared handler error, a panic or a context error,
// puts the status code and details into the reply headers where the
// route carries them (pkg/status). Application exceptions (the
// handler's own, a decode failure, an overload) go as they are: their
// type says what they are to any Thrift client.
//
// An undeclared handler error (a plain Go error) is the server's fault
// as far as the caller can tell: it is logged at Warn with the method
// and the request id, and the caller gets codes.Internal with the
// error's text.
func (c *conn) failReply(r *request, err error) *proto.ApplicationException {
	var (
		ae *proto.ApplicationException
		pe *panicError
		st *status.Status
	)
	switch {
	case err == nil:
		return toAppException(nil)
	case errors.As(err, &st):
		c.s.log.Debug("hatrpc: handler status", "method", r.m.m.Name, "remote", c.remote, "request_id", requestID(r), "code", st.Code().String(), "err", st.Message())
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, ErrReplyRoom): // the peer's doing, not the handler's: not logged
		return proto.NewApplicationException(proto.ExcInternalError, err.Error())
	case errors.As(err, &pe): // logged with its stack where it was recovered
		st = status.New(codes.Internal, err.Error())
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		st = status.Convert(err)
		c.s.log.Debug("hatrpc: handler error", "method", r.m.m.Name, "remote", c.remote, "request_id", requestID(r), "err", err)
	default:
		c.s.log.Warn("hatrpc: handler error", "method", r.m.m.Name, "remote", c.remote, "request_id", requestID(r), "err", err)
		st = status.New(codes.Internal, err.Error())
	}
	if sc := c.statusCall(r); sc != nil {
		md := st.AppendHeaders(nil)
		kv := make([]string, 0, 2*len(md))
		for k, v := range md {
			kv = append(kv, k, v)
		}
		sc.SetReply(kv...)
	}
	return st.Exception()
}

// statusCall returns the call's reply header holder, made for a call
// that sent no headers when its reply can still carry them: a HatRPC
// client that was granted CapHeaders reads a reply's header block whether
// or not it sent one, as lane and FLOCK clients do. Plain Thrift gets
// nil: its replies have no room for headers.
func (c *conn) statusCall(r *request) *metadata.ServerCall {
	switch {
	case r.sc != nil:
		return r.sc // THeader's, or a HatRPC call's that sent headers
	case !r.hat:
		return nil
	case r.tr == trTCP && !c.headers:
		return nil // a client of a version before headers
	}
	r.sc = metadata.NewServerCall(nil)
	return r.sc
}

// busyMD marks the "server busy" answer to a call that found no free
// call slot as codes.Unavailable where the reply carries headers, and
// returns the reply headers of a HatRPC frame: the call did not run, so
// a client may send an idempotent one again.
func (c *conn) busyMD(r *request) metadata.MD {
	sc := c.statusCall(r)
	if sc == nil {
		return nil
	}
	sc.SetReply(status.HeaderCode, strconv.Itoa(int(codes.Unavailable)))
	return replyMD(r)
}
