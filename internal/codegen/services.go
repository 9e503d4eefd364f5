package codegen

import (
	"fmt"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/idl"
)

// helperStructs builds the args and result structs of a function (result is
// nil for oneway functions).
func (g *generator) helperStructs(fn *idl.Function) (args, result *structDef) {
	svc := fn.Service
	args = &structDef{name: argsName(svc.Name, fn.Name), idl: fn.Name + "_args", owner: svc.Program}
	names := fieldGoNames(idl.StructKindStruct, fn.Args)
	for i, a := range fn.Args {
		args.fields = append(args.fields, g.fieldInfo(args, a, names[i], a.Req == idl.Optional))
	}
	if fn.Oneway {
		return args, nil
	}
	result = &structDef{name: resultName(svc.Name, fn.Name), idl: fn.Name + "_result", owner: svc.Program}
	var fields []*idl.Field
	if fn.Returns != nil && fn.Returns.Kind != idl.KindVoid {
		fields = append(fields, &idl.Field{ID: 0, ExplicitID: true, Name: "success", Type: fn.Returns, Req: idl.Optional, Pos: fn.Pos})
	}
	for _, t := range fn.Throws {
		tf := *t
		tf.Req = idl.Optional
		fields = append(fields, &tf)
	}
	names = fieldGoNames(idl.StructKindStruct, fields)
	for i, f := range fields {
		result.fields = append(result.fields, g.fieldInfo(result, f, names[i], true))
	}
	return args, result
}

func hasResult(fn *idl.Function) bool { return fn.Returns != nil && fn.Returns.Kind != idl.KindVoid }

// signature renders `Name(ctx context.Context, a T, ...) (_r R, _err error)`.
func (g *generator) signature(fn *idl.Function) string {
	if isStream(fn) {
		return g.streamSignature(fn)
	}
	owner := fn.Service.Program
	params := g.params(fn)
	res := "(_err error)"
	if hasResult(fn) {
		res = "(_r " + g.goType(fn.Returns, owner) + ", _err error)"
	}
	return publicize(fn.Name) + "(" + strings.Join(params, ", ") + ") " + res
}

// params renders fn's parameters: the context, then one per argument.
func (g *generator) params(fn *idl.Function) []string {
	params := []string{"ctx " + g.e.std("context") + ".Context"}
	for _, a := range fn.Args {
		params = append(params, varName(a.Name)+" "+g.goType(a.Type, fn.Service.Program))
	}
	return params
}

func (g *generator) genService(svc *idl.Service) error {
	res, err := svc.ResolveHints()
	if err != nil {
		return err
	}
	name := publicize(svc.Name)
	for _, fn := range svc.Functions {
		args, result := g.helperStructs(fn)
		g.genStruct(args)
		if result != nil {
			g.genStruct(result)
			g.genThrown(fn, result)
		}
	}
	all := svc.AllFunctions()
	g.genHintTable(svc, res)

	// Handler interface.
	g.e.buf.WriteString(comment(svc.Doc))
	g.e.p("//")
	g.e.p("// %sHandler is implemented by servers of %s; %sserver.Register%s binds it. A", name, svc.Name, g.pkg.name, name)
	g.e.p("// declared exception returned as error reaches the caller as that exception.")
	g.e.p("type %sHandler interface {", name)
	for _, fn := range all {
		g.e.buf.WriteString(comment(fn.Doc))
		g.e.p("%s", g.signature(fn))
	}
	g.e.p("}")
	g.e.p("")
	g.genStreamIfaces(svc)
	g.genClient(svc, all)
	return nil
}

// genRegister renders Register<Svc> into the server subpackage (g is that
// package's generator, so the service's own names come qualified). A
// function with a reply runs through _run<i>, with its arguments and
// result allocated together (_call<i>) when the server calls HandleCall:
// one allocation a call fewer, as on the client (argsAndResult), and none
// when the server hands back a finished call's (server.Method.NewCall).
func (g *generator) genRegister(svc *idl.Service, all []*idl.Function) {
	name := publicize(svc.Name)
	server := g.e.use(serverPath, "server")
	proto := g.e.use(protoPath, g.protoName)
	ctxPkg := g.e.std("context")
	hintsVar := g.qual(svc.Program, name+"Hints")
	structs := make([][2]*structDef, len(all))
	for i, fn := range all {
		// The structs are declared in the types package: build them on a
		// scratch emitter so their field types import nothing here.
		real := g.e
		g.e = newEmitter()
		structs[i][0], structs[i][1] = g.helperStructs(fn)
		g.e = real
	}
	for i, fn := range all {
		if isStream(fn) {
			g.genStreamServerType(svc, fn, structs[i][1])
		}
	}
	handler := g.qual(svc.Program, name+"Handler")
	g.e.p("// Register%s registers h as service %q on s.", name, svc.Name)
	g.e.p("func Register%s(s *%s.Server, h %s) { s.Register(New%sService(h)) }", name, server, handler, name)
	g.e.p("")
	g.e.p("// New%sService is the service Register%s registers: h's methods with", name, name)
	g.e.p("// their hints, as gRPC-Go's service descriptions, for wrapping or testing.")
	g.e.p("func New%sService(h %s) *%s.Service {", name, handler, server)
	for i, fn := range all {
		if fn.Oneway || isStream(fn) {
			continue
		}
		owner := fn.Service.Program
		argsT, resT := g.qual(owner, structs[i][0].name), g.qual(owner, structs[i][1].name)
		g.e.p("type _call%d struct {", i)
		g.e.p("args %s", argsT)
		g.e.p("res  %s", resT)
		g.e.p("}")
		g.e.p("_run%d := func(ctx %s.Context, args *%s, res *%s) (%s.Struct, error) {", i, ctxPkg, argsT, resT, proto)
		g.handleBody(fn, owner, structs[i][0], structs[i][1])
		g.e.p("}")
	}
	g.e.p("return &%s.Service{Name: %q, Hints: &%s, Methods: []%s.Method{", server, svc.Name, hintsVar, server)
	for i, fn := range all {
		owner := fn.Service.Program
		args, result := structs[i][0], structs[i][1]
		argsT := g.qual(owner, args.name)
		g.e.p("{")
		g.e.p("Name: %q,", fn.Name)
		if isStream(fn) {
			g.e.p("Hints: %s.Function(%q),", hintsVar, fn.Name)
			g.genStreamMethod(svc, fn, result)
			g.e.p("},")
			continue
		}
		if fn.Oneway {
			g.e.p("Oneway: true,")
		}
		g.e.p("NewArgs: func() %s.Struct { return %s() },", proto, g.qual(owner, newName(args.name)))
		g.e.p("Hints: %s.Function(%q),", hintsVar, fn.Name)
		g.e.p("Handle: func(ctx %s.Context, a %s.Struct) (%s.Struct, error) {", ctxPkg, proto, proto)
		if fn.Oneway {
			if len(args.fields) > 0 {
				g.e.p("args := a.(*%s)", argsT)
			}
			g.e.p("return nil, %s", g.handlerCall(fn, args))
			g.e.p("},")
			g.e.p("},")
			continue
		}
		argsExpr := "nil" // not asserted: any arguments will do
		if len(args.fields) > 0 {
			argsExpr = "a.(*" + argsT + ")"
		}
		g.e.p("return _run%d(ctx, %s, %s())", i, argsExpr, g.qual(owner, newName(result.name)))
		g.e.p("},")
		g.e.p("NewCall: func(reuse any) (%s.Struct, any) {", proto)
		g.e.p("c, _ := reuse.(*_call%d)", i)
		g.e.p("if c == nil {")
		g.e.p("c = new(_call%d)", i)
		g.e.p("}")
		// Field by field: "*c = _callN{args: ..., res: ...}" built the
		// value on the stack and copied it 16 bytes at a time from 8-byte
		// stores just made (stalled store forwards; ~6 ns of perf samples).
		g.e.p("c.args = *%s()", g.qual(owner, newName(args.name)))
		g.e.p("c.res = *%s()", g.qual(owner, newName(result.name)))
		g.e.p("return &c.args, c")
		g.e.p("},")
		g.e.p("HandleCall: func(ctx %s.Context, call any) (%s.Struct, error) {", ctxPkg, proto)
		g.e.p("c := call.(*_call%d)", i)
		g.e.p("return _run%d(ctx, &c.args, &c.res)", i)
		g.e.p("},")
		g.e.p("},")
	}
	g.e.p("}}")
	g.e.p("}")
	g.e.p("")
}

// handlerCall is the call of fn's handler method with the fields of args.
func (g *generator) handlerCall(fn *idl.Function, args *structDef) string {
	call := []string{"ctx"}
	for _, fd := range args.fields {
		if fd.ptr {
			call = append(call, "args.Get"+fd.name+"()")
		} else {
			call = append(call, "args."+fd.name)
		}
	}
	return "h." + publicize(fn.Name) + "(" + strings.Join(call, ", ") + ")"
}

// handleBody renders the body of _run<i>: run the handler on args and put
// its outcome (a result or a declared exception) in res.
func (g *generator) handleBody(fn *idl.Function, owner *idl.Program, args, result *structDef) {
	callExpr := g.handlerCall(fn, args)
	if hasResult(fn) {
		g.e.p("r, err := %s", callExpr)
	} else {
		g.e.p("err := %s", callExpr)
	}
	g.e.p("if err != nil {")
	for i, fd := range result.fields {
		if fd.f.ID == 0 && hasResult(fn) {
			continue
		}
		g.e.p("var e%d %s", i, g.goType(fd.f.Type, owner))
		g.e.p("if %s.As(err, &e%d) {", g.e.std("errors"), i)
		g.e.p("res.%s = e%d", fd.name, i)
		g.e.p("return res, nil")
		g.e.p("}")
	}
	g.e.p("return nil, err")
	g.e.p("}")
	if hasResult(fn) {
		succ := result.fields[0]
		switch {
		case succ.ptr:
			g.e.p("res.Success = &r")
		case isContainer(fn.Returns) || trueKind(fn.Returns) == idl.KindBinary:
			g.e.p("if r == nil {")
			g.e.p("// nil would read as \"no result\"; an empty value is a result.")
			g.e.p("r = make(%s, 0)", succ.valType)
			g.e.p("}")
			g.e.p("res.Success = r")
		default:
			g.e.p("res.Success = r")
		}
	}
	g.e.p("return res, nil")
}

func (g *generator) genClient(svc *idl.Service, all []*idl.Function) {
	name := publicize(svc.Name)
	client := g.e.use(clientPath, "client")
	proto := g.e.use(protoPath, g.protoName)
	methods := "clientMethods" + name
	g.e.p("var %s = [...]%s.Method{", methods, client)
	for _, fn := range all {
		if isStream(fn) {
			g.e.p("{Service: %q, Name: %q, Oneway: %t, Hints: %sHints.Function(%q), Stream: %s.%s},", svc.Name, fn.Name, fn.Oneway, name, fn.Name,
				g.e.use(streamPath, "stream"), modeConst[fn.Stream])
			continue
		}
		g.e.p("{Service: %q, Name: %q, Oneway: %t, Hints: %sHints.Function(%q)},", svc.Name, fn.Name, fn.Oneway, name, fn.Name)
	}
	g.e.p("}")
	g.e.p("")
	g.e.p("// %sClient calls service %q through a client.Caller: a *client.Conn", name, svc.Name)
	g.e.p("// (one server) or a *cluster.Client (many).")
	g.e.p("type %sClient struct {", name)
	g.e.p("c %s.Caller", client)
	g.e.p("}")
	g.e.p("")
	g.e.p("func New%sClient(c %s.Caller) *%sClient { return &%sClient{c: c} }", name, client, name, name)
	g.e.p("")
	for i, fn := range all {
		owner := fn.Service.Program
		args, result := g.helperStructs(fn)
		if isStream(fn) {
			g.genStreamClient(svc, methods, i, fn, result)
			continue
		}
		g.e.buf.WriteString(comment(fn.Doc))
		g.e.p("func (_c *%sClient) %s {", name, g.signature(fn))
		if fn.Oneway {
			g.e.p("_args := &%s{%s}", g.qual(owner, args.name), argInits(fn, args))
			g.e.p("return _c.c.Call(ctx, &%s[%d], _args, nil)", methods, i)
			g.e.p("}")
			g.e.p("")
			continue
		}
		g.argsAndResult(owner, fn, args, result)
		g.e.p("if _err = _c.c.Call(ctx, &%s[%d], _args, _res); _err != nil {", methods, i)
		g.e.p("return")
		g.e.p("}")
		for _, fd := range result.fields {
			if fd.f.ID == 0 && hasResult(fn) {
				continue
			}
			g.e.p("if _res.%s != nil {", fd.name)
			if hasResult(fn) {
				g.e.p("return _r, _res.%s", fd.name)
			} else {
				g.e.p("return _res.%s", fd.name)
			}
			g.e.p("}")
		}
		if !hasResult(fn) {
			g.e.p("return nil")
			g.e.p("}")
			g.e.p("")
			continue
		}
		g.e.p("if _res.Success == nil {")
		g.e.p("return _r, &%s.ApplicationException{Type: %s.ExcMissingResult, Message: %q}", proto, proto, fmt.Sprintf("%s failed: unknown result", fn.Name))
		g.e.p("}")
		if result.fields[0].ptr {
			g.e.p("return *_res.Success, nil")
		} else {
			g.e.p("return _res.Success, nil")
		}
		g.e.p("}")
		g.e.p("")
		if trueKind(fn.Returns) == idl.KindBinary {
			g.genBorrowed(name, methods, i, fn, args, result)
		}
	}
}

// argsAndResult declares a call's _args and _res, both in one allocation
// (a call's Go cost is a few hundred nanoseconds on a lane, and each
// allocation a tenth of it): nothing keeps either beyond the call, and
// what the caller keeps of the result (its fields' values) is not in it.
func (g *generator) argsAndResult(owner *idl.Program, fn *idl.Function, args, result *structDef) {
	g.e.p("_call := &struct {")
	g.e.p("args %s", g.qual(owner, args.name))
	g.e.p("res  %s", g.qual(owner, result.name))
	g.e.p("}{args: %s{%s}, res: *%s()}", g.qual(owner, args.name), argInits(fn, args), g.qual(owner, newName(result.name)))
	g.e.p("_args, _res := &_call.args, &_call.res")
}

// argInits renders the field initialisers of fn's args struct.
func argInits(fn *idl.Function, args *structDef) string {
	var inits []string
	for j, fd := range args.fields {
		v := varName(fn.Args[j].Name)
		if fd.ptr {
			v = "&" + v
		}
		inits = append(inits, fd.name+": "+v)
	}
	return strings.Join(inits, ", ")
}

// genBorrowed emits <Fn>Borrowed for a function returning binary: the
// result is handed to a callback and may be a slice of the reply buffer
// (client.Conn.CallBorrowed), which saves an allocation and a copy per call.
//
// A Caller that keeps none of a call's values once it returns
// (client.Reuser: a Conn without interceptors) gets the arguments, the
// result and the borrower's closure from a pool, built once per pooled
// value: the two allocations a call made otherwise cost 40–80 ns of a
// 64 B lane call in place (docs/performance/history.md, "Kept changes,
// in order").
func (g *generator) genBorrowed(name, methods string, i int, fn *idl.Function, args, result *structDef) {
	owner := fn.Service.Program
	proto := g.e.use(protoPath, g.protoName)
	client := g.e.use(clientPath, "client")
	sync := g.e.std("sync")
	fname := publicize(fn.Name)
	call, pool := "borrowCall"+name+fname, "borrowCalls"+name+fname
	params := append(g.params(fn), "use func(r []byte) error")
	// done is the borrower's wrapper: exceptions first, then use on the
	// result, reading the value it is a field of (res and use there).
	done := func(res, use string) {
		for _, fd := range result.fields {
			if fd.f.ID == 0 {
				continue
			}
			g.e.p("if %s.%s != nil {", res, fd.name)
			g.e.p("return %s.%s", res, fd.name)
			g.e.p("}")
		}
		g.e.p("if %s.Success == nil {", res)
		g.e.p("return &%s.ApplicationException{Type: %s.ExcMissingResult, Message: %q}", proto, proto, fmt.Sprintf("%s failed: unknown result", fn.Name))
		g.e.p("}")
		g.e.p("return %s(%s.Success)", use, res)
	}
	g.e.p("// %s is a call of %sBorrowed whose values are reused (%s).", call, fname, pool)
	g.e.p("type %s struct {", call)
	g.e.p("args %s", g.qual(owner, args.name))
	g.e.p("res  %s", g.qual(owner, result.name))
	g.e.p("use  func(r []byte) error")
	g.e.p("done func() error")
	g.e.p("}")
	g.e.p("")
	g.e.p("var %s = %s.Pool{New: func() any {", pool, sync)
	g.e.p("_k := new(%s)", call)
	g.e.p("_k.done = func() error {")
	done("_k.res", "_k.use")
	g.e.p("}")
	g.e.p("return _k")
	g.e.p("}}")
	g.e.p("")
	g.e.p("// %sBorrowed is %s for a caller that needs the result only while use", fname, fname)
	g.e.p("// runs: it may be a slice of the reply's buffer, which is reused once use")
	g.e.p("// returns (client.Caller.CallBorrowed). Copy what must outlive use.")
	g.e.p("func (_c *%sClient) %sBorrowed(%s) error {", name, fname, strings.Join(params, ", "))
	g.e.p("if _r, _ok := _c.c.(%s.Reuser); _ok && _r.ReusesValues() {", client)
	g.e.p("_k := %s.Get().(*%s)", pool, call)
	g.e.p("_k.args, _k.res, _k.use = %s{%s}, *%s(), use", g.qual(owner, args.name), argInits(fn, args), g.qual(owner, newName(result.name)))
	g.e.p("_err := _c.c.CallBorrowed(ctx, &%s[%d], &_k.args, &_k.res, _k.done)", methods, i)
	g.e.p("_k.args, _k.res, _k.use = %s{}, %s{}, nil // holds nothing of the caller's while pooled", g.qual(owner, args.name), g.qual(owner, result.name))
	g.e.p("%s.Put(_k)", pool)
	g.e.p("return _err")
	g.e.p("}")
	g.argsAndResult(owner, fn, args, result)
	g.e.p("return _c.c.CallBorrowed(ctx, &%s[%d], _args, _res, func() error {", methods, i)
	done("_res", "use")
	g.e.p("})")
	g.e.p("}")
	g.e.p("")
}
