package codegen

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// Streaming functions (`(streaming.mode="...")`, Kitex's annotation) get
// gRPC-Go's API: per function an XFClient and an XFServer interface in the
// types package, a client method opening the stream, and a handler method
// taking the server's side. The client's messages are the function's one
// argument's struct, the server's its return struct, and the server's
// closing message is the function's result struct (the client stream's
// reply, or a declared exception), as client.Streamer and
// server.StreamHandler define them.

const (
	streamPath   = "github.com/hatrpc/hatrpc/pkg/stream"
	metadataPath = "github.com/hatrpc/hatrpc/pkg/metadata"
)

func isStream(fn *idl.Function) bool { return fn.Stream != stream.None }

// modeConst is the pkg/stream constant of m.
var modeConst = map[stream.Mode]string{stream.Client: "Client", stream.Server: "Server", stream.Bidi: "Bidi"}

// streamIfaceName is the exported interface of one side ("Client" or
// "Server") of fn's stream, declared in the package of fn's service.
func streamIfaceName(fn *idl.Function, side string) string {
	return publicize(fn.Service.Name) + publicize(fn.Name) + side
}

// streamImpl is the unexported type implementing side of fn's stream for
// service svc (which may inherit fn from a service of another package,
// whose unexported types it cannot use).
func streamImpl(svc *idl.Service, fn *idl.Function, side string) string {
	return "stream" + publicize(svc.Name) + publicize(fn.Name) + side
}

// streamVarName is varName, also kept off the packages and locals of the
// code opening a stream.
func streamVarName(s string) string {
	v := varName(s)
	switch v {
	case "stream", "io", "metadata", "_st", "_ok", "_x", "_s":
		return v + "_a1"
	}
	return v
}

// streamMsgs are the Go types of fn's client and server messages and
// expressions making a fresh one of each (defaults set, as decoding wants).
func (g *generator) streamMsgs(fn *idl.Function) (in, out, newIn, newOut string) {
	owner := fn.Service.Program
	return g.goType(fn.Args[0].Type, owner), g.goType(fn.Returns, owner), g.ctor(fn.Args[0].Type), g.ctor(fn.Returns)
}

func (g *generator) ctor(t *idl.Type) string {
	tt := t.TrueType()
	return g.qual(tt.Struct.Program, newName(publicize(tt.Struct.Name))) + "()"
}

// streamSignature is a streaming function's handler method.
func (g *generator) streamSignature(fn *idl.Function) string {
	srv := g.qual(fn.Service.Program, streamIfaceName(fn, "Server"))
	if fn.Stream == stream.Server {
		in, _, _, _ := g.streamMsgs(fn)
		return fmt.Sprintf("%s(%s %s, stream %s) error", publicize(fn.Name), streamVarName(fn.Args[0].Name), in, srv)
	}
	return fmt.Sprintf("%s(stream %s) error", publicize(fn.Name), srv)
}

// exceptionFields are the declared exceptions of a result struct.
func exceptionFields(fn *idl.Function, result *structDef) []*fieldDef {
	var out []*fieldDef
	for _, fd := range result.fields {
		if fd.f.ID == 0 && hasResult(fn) {
			continue
		}
		out = append(out, fd)
	}
	return out
}

// genStreamIfaces renders the two sides' interfaces of svc's own streaming
// functions.
func (g *generator) genStreamIfaces(svc *idl.Service) {
	for _, fn := range svc.Functions {
		if !isStream(fn) {
			continue
		}
		ctx := g.e.std("context")
		md := g.e.use(metadataPath, "metadata")
		in, out, _, _ := g.streamMsgs(fn)
		fname := publicize(fn.Name)
		cl, sv := streamIfaceName(fn, "Client"), streamIfaceName(fn, "Server")
		g.e.p("// %s is the client's side of one %s stream (streaming.mode=%q),", cl, fname, fn.Stream)
		g.e.p("// opened by (*%sClient).%s.", publicize(svc.Name), fname)
		g.e.p("type %s interface {", cl)
		if fn.Stream.ClientSends() {
			g.e.p("// Send sends one message; it blocks while the server's window is full.")
			g.e.p("// After the stream ended it returns io.EOF, and %s says how it ended.", map[bool]string{true: "CloseAndRecv", false: "Recv"}[fn.Stream == stream.Client])
			g.e.p("Send(%s) error", in)
		}
		if fn.Stream == stream.Client {
			g.e.p("// CloseAndRecv ends the client's side and returns the server's reply,")
			g.e.p("// or the declared exception or error the stream ended with.")
			g.e.p("CloseAndRecv() (%s, error)", out)
		} else {
			g.e.p("// Recv returns the server's next message: io.EOF once the server ended")
			g.e.p("// the stream cleanly, else the declared exception or error it ended with.")
			g.e.p("// With the function's borrow_msgs hint on (c_hint), its binary values")
			g.e.p("// are valid only until the next Recv: copy what must outlive it.")
			g.e.p("Recv() (%s, error)", out)
			g.e.p("// RecvInto is Recv into m, reset first, instead of a new message (a")
			g.e.p("// loop reading into one message allocates none per message, as")
			g.e.p("// gRPC-Go's RecvMsg(m)); after an error m holds no valid message.")
			g.e.p("RecvInto(m %s) error", out)
		}
		if fn.Stream == stream.Bidi {
			g.e.p("// CloseSend ends the client's side: the server's Recv returns io.EOF.")
			g.e.p("CloseSend() error")
		}
		g.e.p("// Header waits for the server's header metadata.")
		g.e.p("Header() (%s.MD, error)", md)
		g.e.p("// Trailer is the server's trailer metadata, complete once the stream ended.")
		g.e.p("Trailer() %s.MD", md)
		g.e.p("// Context is the stream's context: it ends when the stream does.")
		g.e.p("Context() %s.Context", ctx)
		g.e.p("}")
		g.e.p("")
		g.e.p("// %s is the server's side of one %s stream, handed to %sHandler.%s.", sv, fname, publicize(svc.Name), fname)
		g.e.p("// The stream ends when the handler returns: a declared exception it")
		g.e.p("// returns reaches the client as that exception, after the messages sent.")
		g.e.p("type %s interface {", sv)
		if fn.Stream.ServerSends() {
			g.e.p("// Send sends one message; it blocks while the client's window is full.")
			g.e.p("Send(%s) error", out)
		}
		if fn.Stream.ClientSends() {
			g.e.p("// Recv returns the client's next message; io.EOF once it closed its side.")
			g.e.p("// With the function's borrow_msgs hint on (s_hint), its binary values")
			g.e.p("// are valid only until the next Recv or the handler's return.")
			g.e.p("Recv() (%s, error)", in)
			g.e.p("// RecvInto is Recv into m, reset first, instead of a new message (a")
			g.e.p("// loop reading into one message allocates none per message).")
			g.e.p("RecvInto(m %s) error", in)
		}
		if fn.Stream == stream.Client {
			g.e.p("// SendAndClose sets the reply, sent as the stream's closing message when")
			g.e.p("// the handler returns nil; it may be called once.")
			g.e.p("SendAndClose(%s) error", out)
		}
		g.e.p("// SendHeader sends header metadata now (else with the first message).")
		g.e.p("SendHeader(%s.MD) error", md)
		g.e.p("// SetTrailer adds metadata sent when the stream ends.")
		g.e.p("SetTrailer(%s.MD)", md)
		g.e.p("// Context is the stream's context: canceled when the client cancels or")
		g.e.p("// goes, or its deadline passes.")
		g.e.p("Context() %s.Context", ctx)
		g.e.p("}")
		g.e.p("")
	}
}

// genStreamClient renders the client method opening fn's stream (the
// i-th of methods) and the type behind the interface it returns.
func (g *generator) genStreamClient(svc *idl.Service, methods string, i int, fn *idl.Function, result *structDef) {
	owner := fn.Service.Program
	client := g.e.use(clientPath, "client")
	proto := g.e.use(protoPath, g.protoName)
	io := g.e.std("io")
	in, out, _, newOut := g.streamMsgs(fn)
	impl := streamImpl(svc, fn, "Client")
	exc := exceptionFields(fn, result)
	g.e.p("// %s is one %s stream opened by (*%sClient).%s.", impl, publicize(fn.Name), publicize(svc.Name), publicize(fn.Name))
	g.e.p("type %s struct {", impl)
	g.e.p("%s.Stream", client)
	g.e.p("res %s // the server's closing message, decoded when the stream ends", g.qual(owner, result.name))
	g.e.p("}")
	g.e.p("")
	end := func(e string) string { return e }
	if len(exc) > 0 && fn.Stream != stream.Client {
		end = func(e string) string { return "_x.end(" + e + ")" }
		g.e.p("// end is the error Recv returns for err: after a clean end, the declared")
		g.e.p("// exception the server ended the stream with, if any.")
		g.e.p("func (_x *%s) end(err error) error {", impl)
		g.e.p("if err != %s.EOF {", io)
		g.e.p("return err")
		g.e.p("}")
		for _, fd := range exc {
			g.e.p("if _x.res.%s != nil {", fd.name)
			g.e.p("return _x.res.%s", fd.name)
			g.e.p("}")
		}
		g.e.p("return err")
		g.e.p("}")
		g.e.p("")
	}
	if fn.Stream.ClientSends() {
		g.e.p("func (_x *%s) Send(_m %s) error { return _x.SendMsg(_m) }", impl, in)
		g.e.p("")
	}
	if fn.Stream.ServerSends() {
		g.e.p("func (_x *%s) Recv() (%s, error) {", impl, out)
		g.e.p("_m := %s", newOut)
		g.e.p("if _err := _x.RecvMsg(_m); _err != nil {")
		g.e.p("return nil, %s", end("_err"))
		g.e.p("}")
		g.e.p("return _m, nil")
		g.e.p("}")
		g.e.p("")
		g.e.p("func (_x *%s) RecvInto(_m %s) error {", impl, out)
		g.e.p("*_m = *%s", newOut)
		g.e.p("return %s", end("_x.RecvMsg(_m)"))
		g.e.p("}")
		g.e.p("")
	}
	if fn.Stream == stream.Client {
		g.e.p("func (_x *%s) CloseAndRecv() (%s, error) {", impl, out)
		g.e.p("if _err := _x.CloseSend(); _err != nil && _err != %s.EOF {", io)
		g.e.p("return nil, _err")
		g.e.p("}")
		g.e.p("// The reply is the closing message, in res; a message before it is a")
		g.e.p("// server that does not know the function streams from the client.")
		g.e.p("_err := _x.RecvMsg(%s)", newOut)
		g.e.p("if _err == nil {")
		g.e.p("_err = &%s.ApplicationException{Type: %s.ExcProtocolError, Message: %q}", proto, proto,
			fmt.Sprintf("%s failed: the server sent a message on a client stream", fn.Name))
		g.e.p("}")
		g.e.p("if _err != %s.EOF {", io)
		g.e.p("return nil, _err")
		g.e.p("}")
		for _, fd := range exc {
			g.e.p("if _x.res.%s != nil {", fd.name)
			g.e.p("return nil, _x.res.%s", fd.name)
			g.e.p("}")
		}
		g.e.p("if _x.res.Success == nil {")
		g.e.p("return nil, &%s.ApplicationException{Type: %s.ExcMissingResult, Message: %q}", proto, proto, fmt.Sprintf("%s failed: unknown result", fn.Name))
		g.e.p("}")
		g.e.p("return _x.res.Success, nil")
		g.e.p("}")
		g.e.p("")
	}

	params := "ctx " + g.e.std("context") + ".Context"
	if fn.Stream == stream.Server {
		params += ", " + streamVarName(fn.Args[0].Name) + " " + in
	}
	g.e.buf.WriteString(comment(fn.Doc))
	g.e.p("//")
	g.e.p("// %s opens a stream (streaming.mode=%q); canceling ctx ends it.", publicize(fn.Name), fn.Stream)
	g.e.p("// The Caller must be a client.Streamer (a *client.Conn): any other fails")
	g.e.p("// with an error matching stream.ErrNeedsHatRPCPeer.")
	g.e.p("func (_c *%sClient) %s(%s) (%s, error) {", publicize(svc.Name), publicize(fn.Name), params, g.qual(owner, streamIfaceName(fn, "Client")))
	g.e.p("_st, _ok := _c.c.(%s.Streamer)", client)
	g.e.p("if !_ok {")
	g.e.p("return nil, %s.Errorf(\"%s.%s: %%T opens no streams: %%w\", _c.c, %s.ErrNeedsHatRPCPeer)", g.e.std("fmt"), svc.Name, fn.Name, g.e.use(streamPath, "stream"))
	g.e.p("}")
	g.e.p("_x := &%s{res: *%s()}", impl, g.qual(owner, newName(result.name)))
	g.e.p("_s, _err := _st.NewStream(ctx, &%s[%d], &_x.res)", methods, i)
	g.e.p("if _err != nil {")
	g.e.p("return nil, _err")
	g.e.p("}")
	g.e.p("_x.Stream = _s")
	if fn.Stream == stream.Server {
		g.e.p("// io.EOF: the server already ended the stream; Recv says how.")
		g.e.p("if _err = _s.SendMsg(%s); _err != nil && _err != %s.EOF {", streamVarName(fn.Args[0].Name), io)
		g.e.p("return nil, _err")
		g.e.p("}")
		g.e.p("if _err = _s.CloseSend(); _err != nil && _err != %s.EOF {", io)
		g.e.p("return nil, _err")
		g.e.p("}")
	}
	g.e.p("return _x, nil")
	g.e.p("}")
	g.e.p("")
}
