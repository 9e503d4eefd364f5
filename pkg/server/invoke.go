package server

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// panicError carries a recovered handler panic.
type panicError struct{ v any }

func (e *panicError) Error() string { return fmt.Sprintf("handler panic: %v", e.v) }

func toAppException(err error) *proto.ApplicationException {
	var ae *proto.ApplicationException
	switch {
	case err == nil:
		return proto.NewApplicationException(proto.ExcMissingResult, "handler returned no result")
	case errors.As(err, &ae):
		return ae
	}
	return proto.NewApplicationException(proto.ExcInternalError, err.Error())
}

func (c *conn) invoke(ctx context.Context, r *request, args proto.Struct, call any) (res proto.Struct, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.s.log.Error("hatrpc: handler panic", "method", r.m.m.Name, "remote", c.remote,
				"request_id", requestID(r), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res, err = nil, &panicError{v}
		}
	}()
	ics := c.s.opts.interceptors
	m := r.m.m
	if m.Handle == nil && call == nil {
		return nil, errUnaryStream(m)
	}
	if len(ics) == 0 {
		if call != nil {
			return m.HandleCall(ctx, call)
		}
		return m.Handle(ctx, args)
	}
	info := &CallInfo{
		Service: r.m.svc, Method: r.m.m, Seqid: r.seqid, Transport: transportNames[r.tr],
		Protocol: r.proto, Remote: c.remote,
	}
	if dl, ok := ctx.Deadline(); ok {
		info.Deadline = dl
	}
	h := m.Handle
	if call != nil {
		h = func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
			if a == args { // not replaced: call still holds it
				return m.HandleCall(ctx, call)
			}
			return m.Handle(ctx, a)
		}
	}
	return chain(ctx, ics, info, args, h)
}

func chain(ctx context.Context, ics []Interceptor, info *CallInfo, args proto.Struct, h Handler) (proto.Struct, error) {
	if len(ics) == 0 {
		return h(ctx, args)
	}
	return ics[0](ctx, info, args, func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
		return chain(ctx, ics[1:], info, a, h)
	})
}
