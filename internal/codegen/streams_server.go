package codegen

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// genStreamServerType renders, in the server package, the type behind
// fn's XFServer interface for service svc.
func (g *generator) genStreamServerType(svc *idl.Service, fn *idl.Function, result *structDef) {
	server := g.e.use(serverPath, "server")
	ctx := g.e.std("context")
	in, out, newIn, _ := g.streamMsgs(fn)
	impl := streamImpl(svc, fn, "Server")
	g.e.p("// %s is the server's side of one %s stream.", impl, publicize(fn.Name))
	g.e.p("type %s struct {", impl)
	g.e.p("%s.ServerStream", server)
	g.e.p("ctx %s.Context // as interceptors passed it on", ctx)
	if fn.Stream == stream.Client {
		g.e.p("res  *%s", g.qual(fn.Service.Program, result.name))
		g.e.p("sent bool")
	}
	g.e.p("}")
	g.e.p("")
	g.e.p("func (_x *%s) Context() %s.Context { return _x.ctx }", impl, ctx)
	g.e.p("")
	if fn.Stream.ServerSends() {
		g.e.p("func (_x *%s) Send(_m %s) error { return _x.SendMsg(_m) }", impl, out)
		g.e.p("")
	}
	if fn.Stream.ClientSends() {
		g.e.p("func (_x *%s) Recv() (%s, error) {", impl, in)
		g.e.p("_m := %s", newIn)
		g.e.p("if _err := _x.RecvMsg(_m); _err != nil {")
		g.e.p("return nil, _err")
		g.e.p("}")
		g.e.p("return _m, nil")
		g.e.p("}")
		g.e.p("")
		g.e.p("func (_x *%s) RecvInto(_m %s) error {", impl, in)
		g.e.p("*_m = *%s", newIn)
		g.e.p("return _x.RecvMsg(_m)")
		g.e.p("}")
		g.e.p("")
	}
	if fn.Stream == stream.Client {
		g.e.p("func (_x *%s) SendAndClose(_m %s) error {", impl, out)
		g.e.p("if _x.sent {")
		g.e.p("return %s.New(%q)", g.e.std("errors"), fmt.Sprintf("%s.%s: SendAndClose called twice", svc.Name, fn.Name))
		g.e.p("}")
		g.e.p("_x.sent, _x.res.Success = true, _m")
		g.e.p("return nil")
		g.e.p("}")
		g.e.p("")
	}
}

// genStreamMethod renders the server.Method fields of streaming function
// fn: no NewArgs or Handle, so the server answers a unary call of it (a
// plain Thrift client, whose compiler ignores the annotation) itself.
func (g *generator) genStreamMethod(svc *idl.Service, fn *idl.Function, result *structDef) {
	owner := fn.Service.Program
	server := g.e.use(serverPath, "server")
	proto := g.e.use(protoPath, g.protoName)
	ctxPkg := g.e.std("context")
	st := g.e.use(streamPath, "stream")
	io := g.e.std("io")
	_, _, newIn, _ := g.streamMsgs(fn)
	impl := streamImpl(svc, fn, "Server")
	g.e.p("Stream: %s.%s,", st, modeConst[fn.Stream])
	g.e.p("HandleStream: func(ctx %s.Context, _s %s.ServerStream) (%s.Struct, error) {", ctxPkg, server, proto)
	exc := exceptionFields(fn, result)
	if fn.Stream == stream.Client {
		g.e.p("_res := %s()", g.qual(owner, newName(result.name)))
	}
	fname := publicize(fn.Name)
	switch fn.Stream {
	case stream.Server:
		g.e.p("_req := %s", newIn)
		g.e.p("if _err := _s.RecvMsg(_req); _err != nil {")
		g.e.p("if _err == %s.EOF {", io)
		g.e.p("_err = &%s.ApplicationException{Type: %s.ExcProtocolError, Message: %q}", proto, proto,
			fmt.Sprintf("%s.%s: the client closed the stream before its request", svc.Name, fn.Name))
		g.e.p("}")
		g.e.p("return nil, _err")
		g.e.p("}")
		g.e.p("_err := h.%s(_req, &%s{ServerStream: _s, ctx: ctx})", fname, impl)
	case stream.Client:
		g.e.p("_err := h.%s(&%s{ServerStream: _s, ctx: ctx, res: _res})", fname, impl)
	default:
		g.e.p("_err := h.%s(&%s{ServerStream: _s, ctx: ctx})", fname, impl)
	}
	g.e.p("if _err != nil {")
	for i, fd := range exc {
		g.e.p("var _e%d %s", i, g.goType(fd.f.Type, owner))
		g.e.p("if %s.As(_err, &_e%d) {", g.e.std("errors"), i)
		if fn.Stream == stream.Client {
			g.e.p("_res.Success = nil // the exception is the outcome, whatever SendAndClose set")
		} else {
			g.e.p("_res := %s()", g.qual(owner, newName(result.name)))
		}
		g.e.p("_res.%s = _e%d", fd.name, i)
		g.e.p("return _res, nil")
		g.e.p("}")
	}
	g.e.p("return nil, _err")
	g.e.p("}")
	if fn.Stream == stream.Client {
		g.e.p("return _res, nil")
	} else {
		g.e.p("return nil, nil // a clean end: the messages were the outcome")
	}
	g.e.p("},")
}
