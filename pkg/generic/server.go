package generic

import (
	"context"
	"errors"
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// HandlerFunc serves every function of a generic server: args is a JSON
// object keyed by argument name; the result is the function's return
// value as JSON (ignored for void and oneway functions). Returning an
// *Exception throws that declared exception; any other error reaches the
// caller as an application exception, as from generated code.
type HandlerFunc func(ctx context.Context, method string, args []byte) (result []byte, err error)

// NewServer loads idlFile and returns service as a server.Service that
// runs h for every function (streaming ones: WithStreamHandler's): register
// it with (*server.Server).Register, as generated RegisterX functions do.
func NewServer(idlFile, service string, h HandlerFunc, opts ...Option) (*server.Service, error) {
	d, err := Load(idlFile, opts...)
	if err != nil {
		return nil, err
	}
	svc, err := d.Service(service)
	if err != nil {
		return nil, err
	}
	return svc.Server(h), nil
}

// Server returns s as a server.Service whose functions run h, and its
// streaming functions the stream handler (WithStreamHandler, given here or
// to Load), planned with the IDL's hints as generated code is.
func (s *Service) Server(h HandlerFunc, opts ...Option) *server.Service {
	o := s.idl.opts
	for _, f := range opts {
		f(&o)
	}
	out := &server.Service{Name: s.Name(), Hints: s.Hints}
	lim := &s.idl.lim
	for _, fn := range s.Functions() {
		sh := shapesOf(fn)
		if fn.Stream != stream.None {
			out.Methods = append(out.Methods, server.Method{Name: fn.Name, Hints: s.Hints.Function(fn.Name),
				Stream: fn.Stream, HandleStream: streamMethod(sh, lim, o.streams)})
			continue
		}
		out.Methods = append(out.Methods, server.Method{
			Name:    fn.Name,
			Oneway:  fn.Oneway,
			Hints:   s.Hints.Function(fn.Name),
			NewArgs: func() proto.Struct { return &body{s: sh.args, lim: lim, path: "args", borrow: true} },
			Handle: func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
				return serve(ctx, sh, lim, h, a.(*body))
			},
		})
	}
	return out
}

func serve(ctx context.Context, sh *shapes, lim *proto.Limits, h HandlerFunc, args *body) (proto.Struct, error) {
	argsJSON := appendJSON(nil, args.out, structType(sh.args))
	out, err := h(ctx, sh.fn.Name, argsJSON)
	return resultOf(sh, lim, out, err)
}

// resultOf is the result struct a handler's outcome is sent as: out, the
// return value as JSON, or err, a declared *Exception or any other error.
func resultOf(sh *shapes, lim *proto.Limits, out []byte, err error) (proto.Struct, error) {
	res := &body{s: sh.result, lim: lim, path: "result", in: map[string]any{}, throws: sh.fn.Throws}
	if err != nil {
		var ex *Exception
		if !errors.As(err, &ex) {
			return nil, err
		}
		f := thrown(sh.fn, ex)
		if f == nil {
			return nil, &proto.ApplicationException{Type: proto.ExcInternalError,
				Message: fmt.Sprintf("generic: %s does not declare exception %q", sh.fn.Name, ex.Type+ex.Field)}
		}
		v, err := exceptionValue(ex, f)
		if err != nil {
			return nil, internal(err)
		}
		res.in[f.Name] = v
		return checked(res)
	}
	if sh.fn.Oneway {
		return nil, nil
	}
	if !sh.void {
		v, err := parseJSON("result", out)
		if err != nil {
			return nil, internal(err)
		}
		if v == nil {
			return nil, &proto.ApplicationException{Type: proto.ExcMissingResult, Message: sh.fn.Name + " failed: handler returned null"}
		}
		res.in["success"] = v
	}
	return checked(res)
}

// checked fails a result the IDL does not allow before the server encodes
// it, with the path of the first mismatch.
func checked(res *body) (proto.Struct, error) {
	if err := res.check(); err != nil {
		return nil, internal(err)
	}
	return res, nil
}

func internal(err error) error {
	return &proto.ApplicationException{Type: proto.ExcInternalError, Message: "generic: " + err.Error()}
}

// thrown finds the throws entry ex names, by field name or type name
// (as written, "shared.Oops", or bare, "Oops").
func thrown(fn *idl.Function, ex *Exception) *idl.Field {
	for _, f := range fn.Throws {
		tt := f.Type.TrueType()
		byType := ex.Type == tt.Name || ex.Type == f.Type.Name || tt.Struct != nil && ex.Type == tt.Struct.Name
		if ex.Field != "" && ex.Field == f.Name || ex.Field == "" && byType {
			return f
		}
	}
	return nil
}

func exceptionValue(ex *Exception, f *idl.Field) (any, error) {
	if ex.Value != nil {
		return ex.Value, nil
	}
	if len(ex.JSON) == 0 {
		return map[string]any{}, nil
	}
	return parseJSON("result."+f.Name, ex.JSON)
}
