package generic

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// A streaming function (`(streaming.mode="...")`) takes one struct and
// returns a struct: each message the client sends is the argument's
// struct, each message the server sends the return struct, as generated
// code has it. Messages are objects keyed by field name here.

// messages is the struct of each direction's messages.
func messages(fn *idl.Function) (in, out *idl.Struct) {
	return fn.Args[0].Type.TrueType().Struct, fn.Returns.TrueType().Struct
}

// Stream is one stream opened by (*Client).Stream.
type Stream struct {
	st      client.Stream
	sh      *shapes
	lim     *proto.Limits
	in, out *idl.Struct
	res     *body // the server's closing message: a client stream's reply, or a declared exception
}

// Stream opens a stream of a streaming function. For a server stream,
// Send the request and CloseSend, then Recv until io.EOF; for a client
// stream, Send each message and CloseAndRecv; a bidirectional stream
// sends and receives independently. Canceling ctx ends the stream on both
// sides. The Caller must be a *client.Conn (client.Streamer).
func (c *Client) Stream(ctx context.Context, method string) (*Stream, error) {
	m, err := c.method(method)
	if err != nil {
		return nil, err
	}
	fn := m.sh.fn
	if fn.Stream == stream.None {
		return nil, fmt.Errorf("generic: %s.%s is not a streaming function: call it", c.svc.Name(), fn.Name)
	}
	st, ok := c.c.(client.Streamer)
	if !ok {
		return nil, fmt.Errorf("generic: %s.%s: %T opens no streams: %w", c.svc.Name(), fn.Name, c.c, stream.ErrNeedsHatRPCPeer)
	}
	s := &Stream{sh: m.sh, lim: &c.svc.idl.lim}
	s.in, s.out = messages(fn)
	s.res = &body{s: m.sh.result, lim: s.lim, path: "result", throws: fn.Throws}
	if s.st, err = st.NewStream(ctx, &m.m, s.res); err != nil {
		return nil, err
	}
	return s, nil
}

// Mode is how the stream's function streams.
func (s *Stream) Mode() stream.Mode { return s.sh.fn.Stream }

// Context is the stream's context: it ends when the stream does.
func (s *Stream) Context() context.Context { return s.st.Context() }

// Header waits for the server's header metadata.
func (s *Stream) Header() (metadata.MD, error) { return s.st.Header() }

// Trailer is the server's trailer metadata, complete once Recv returned an
// error.
func (s *Stream) Trailer() metadata.MD { return s.st.Trailer() }

// Send sends one message, the argument struct's fields by name; a value
// that does not match the IDL is refused (*ValueError) before anything is
// sent and the stream goes on.
func (s *Stream) Send(msg map[string]any) error {
	b := &body{s: s.in, lim: s.lim, path: "msg", in: msg}
	if err := b.check(); err != nil {
		return err
	}
	return s.st.SendMsg(b)
}

// SendJSON is Send with the message as a JSON object.
func (s *Stream) SendJSON(msg []byte) error {
	obj, err := object("msg", msg)
	if err != nil {
		return err
	}
	return s.Send(obj)
}

// CloseSend ends the client's side; the server's Recv sees io.EOF.
func (s *Stream) CloseSend() error { return s.st.CloseSend() }

// Recv returns the server's next message; io.EOF once the server ended
// the stream cleanly, an *Exception when it ended it with a declared
// exception, else the stream's error.
func (s *Stream) Recv() (map[string]any, error) {
	m := &body{s: s.out, lim: s.lim, path: "msg"}
	if err := s.st.RecvMsg(m); err != nil {
		if err == io.EOF {
			if ex := s.thrown(); ex != nil {
				return nil, ex
			}
		}
		return nil, err
	}
	if m.out == nil {
		m.out = map[string]any{}
	}
	return m.out, nil
}

// RecvJSON is Recv with the message as a JSON object.
func (s *Stream) RecvJSON() ([]byte, error) {
	v, err := s.Recv()
	if err != nil {
		return nil, err
	}
	return appendJSON(nil, v, structType(s.out)), nil
}

// CloseAndRecv ends a client stream's sending side and returns the
// server's reply (the function's return value), or the declared exception
// it threw as *Exception.
func (s *Stream) CloseAndRecv() (map[string]any, error) {
	if s.sh.fn.Stream != stream.Client {
		return nil, fmt.Errorf("generic: CloseAndRecv is for client streams; %s streams %s: Recv until io.EOF", s.sh.fn.Name, s.sh.fn.Stream)
	}
	if err := s.st.CloseSend(); err != nil && err != io.EOF {
		return nil, err
	}
	err := s.st.RecvMsg(&body{s: s.out, lim: s.lim, path: "msg"})
	if err == nil {
		err = &proto.ApplicationException{Type: proto.ExcProtocolError,
			Message: s.sh.fn.Name + " failed: the server sent a message on a client stream"}
	}
	if err != io.EOF {
		return nil, err
	}
	if ex := s.thrown(); ex != nil {
		return nil, ex
	}
	v, ok := s.res.out["success"].(map[string]any)
	if !ok {
		return nil, &proto.ApplicationException{Type: proto.ExcMissingResult, Message: s.sh.fn.Name + " failed: unknown result"}
	}
	return v, nil
}

// CloseAndRecvJSON is CloseAndRecv with the reply as a JSON object.
func (s *Stream) CloseAndRecvJSON() ([]byte, error) {
	v, err := s.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	return appendJSON(nil, v, structType(s.out)), nil
}

// thrown is the declared exception the closing message carries.
func (s *Stream) thrown() *Exception {
	for _, f := range s.sh.fn.Throws {
		if v, ok := s.res.out[f.Name]; ok {
			obj, _ := v.(map[string]any)
			return &Exception{Field: f.Name, Type: f.Type.TrueType().Name, Value: obj, JSON: appendJSON(nil, v, f.Type)}
		}
	}
	return nil
}

// object parses a JSON object (null or empty: no fields).
func object(path string, data []byte) (map[string]any, error) {
	if len(data) == 0 {
		return nil, nil
	}
	v, err := parseJSON(path, data)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return x, nil
	}
	return nil, &ValueError{Path: path, Msg: "want object, got " + kind(v)}
}

// StreamHandlerFunc serves every streaming function of a generic server
// (WithStreamHandler). It reads the client's messages with st.Recv and
// sends its own with st.Send; for a client stream, result is the reply (a
// JSON object of the return struct), ignored otherwise. Returning an
// *Exception ends the stream with that declared exception; any other
// error reaches the client as an application exception.
type StreamHandlerFunc func(ctx context.Context, method string, st *ServerStream) (result []byte, err error)

// WithStreamHandler serves a generic server's streaming functions with h;
// without it they answer each stream with an application exception.
func WithStreamHandler(h StreamHandlerFunc) Option {
	return func(o *options) { o.streams = h }
}

// ServerStream is the server's side of one generic stream.
type ServerStream struct {
	st      server.ServerStream
	ctx     context.Context
	lim     *proto.Limits
	in, out *idl.Struct
}

// Context is the stream's context: canceled when the client cancels or
// goes, or its deadline passes.
func (s *ServerStream) Context() context.Context { return s.ctx }

// SendHeader sends header metadata now (else it goes with the first
// message or the closing one).
func (s *ServerStream) SendHeader(md metadata.MD) error { return s.st.SendHeader(md) }

// SetTrailer adds metadata sent with the closing message.
func (s *ServerStream) SetTrailer(md metadata.MD) { s.st.SetTrailer(md) }

// Recv returns the client's next message; io.EOF once the client closed
// its side.
func (s *ServerStream) Recv() (map[string]any, error) {
	m := &body{s: s.in, lim: s.lim, path: "msg"}
	if err := s.st.RecvMsg(m); err != nil {
		return nil, err
	}
	if m.out == nil {
		m.out = map[string]any{}
	}
	return m.out, nil
}

// RecvJSON is Recv with the message as a JSON object.
func (s *ServerStream) RecvJSON() ([]byte, error) {
	v, err := s.Recv()
	if err != nil {
		return nil, err
	}
	return appendJSON(nil, v, structType(s.in)), nil
}

// Send sends one message, the return struct's fields by name; one that
// does not match the IDL is refused (*ValueError) before it is sent.
func (s *ServerStream) Send(msg map[string]any) error {
	b := &body{s: s.out, lim: s.lim, path: "msg", in: msg}
	if err := b.check(); err != nil {
		return err
	}
	return s.st.SendMsg(b)
}

// SendJSON is Send with the message as a JSON object.
func (s *ServerStream) SendJSON(msg []byte) error {
	obj, err := object("msg", msg)
	if err != nil {
		return err
	}
	return s.Send(obj)
}

// streamMethod is a streaming function of a generic server.
func streamMethod(sh *shapes, lim *proto.Limits, h StreamHandlerFunc) server.StreamHandler {
	in, out := messages(sh.fn)
	return func(ctx context.Context, st server.ServerStream) (proto.Struct, error) {
		if h == nil {
			return nil, &proto.ApplicationException{Type: proto.ExcUnknownMethod,
				Message: "generic: " + sh.fn.Name + " streams and the server has no stream handler (generic.WithStreamHandler)"}
		}
		result, err := h(ctx, sh.fn.Name, &ServerStream{st: st, ctx: ctx, lim: lim, in: in, out: out})
		if err != nil {
			var ex *Exception
			if !errors.As(err, &ex) {
				return nil, err
			}
			return resultOf(sh, lim, nil, ex)
		}
		if sh.fn.Stream != stream.Client {
			return nil, nil // a clean end: the messages were the outcome
		}
		return resultOf(sh, lim, result, nil)
	}
}
