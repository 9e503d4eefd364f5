package roundtrip_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// fakeStreamer is a client.Caller and client.Streamer that runs a
// service's stream handlers in memory: each stream is a pipe whose two
// ends keep the promises of client.Stream and server.ServerStream
// (messages encoded as on the wire and decoded into fresh structs, the
// handler's closing message decoded into final, io.EOF after a clean end,
// io.EOF from SendMsg once the other side ended), with no transport. It
// tests what the generated wrappers do with those promises; the runtime's
// own streams are tested with the runtime.
type fakeStreamer struct {
	svc *server.Service
	wg  sync.WaitGroup // the handlers' goroutines
}

func (f *fakeStreamer) Call(context.Context, *client.Method, proto.Struct, proto.Struct) error {
	return errors.New("fake: no unary calls")
}

func (f *fakeStreamer) CallBorrowed(context.Context, *client.Method, proto.Struct, proto.Struct, func() error) error {
	return errors.New("fake: no unary calls")
}

func (f *fakeStreamer) NewStream(ctx context.Context, m *client.Method, final proto.Struct) (client.Stream, error) {
	var sm *server.Method
	for i := range f.svc.Methods {
		if f.svc.Methods[i].Name == m.Name {
			sm = &f.svc.Methods[i]
		}
	}
	if sm == nil || sm.HandleStream == nil || sm.Stream != m.Stream {
		return nil, fmt.Errorf("fake: %s is no %s stream of the server", m.Name, m.Stream)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &pipe{ctx: ctx, up: make(chan []byte), down: make(chan []byte), ended: make(chan struct{})}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer cancel() // after ended closes: the stream is over for both ends
		fin, err := sm.HandleStream(ctx, serverEnd{p})
		if err == nil && fin != nil {
			p.final, err = proto.Marshal(proto.Binary, nil, fin)
		}
		var ae *proto.ApplicationException
		if err != nil && !errors.As(err, &ae) {
			// Any other error travels as an application exception, as
			// the runtime sends it (docs/design/wire.md section 4).
			err = proto.NewApplicationException(proto.ExcInternalError, err.Error())
		}
		p.err = err
		close(p.ended)
	}()
	return &clientEnd{pipe: p, final: final}, nil
}

// wait returns once every handler has returned.
func (f *fakeStreamer) wait() { f.wg.Wait() }

// pipe is one stream. up and down are unbuffered: a message is sent once
// the other end took it, so the handler has returned (ended) only after
// the client received every message it sent.
type pipe struct {
	ctx   context.Context
	up    chan []byte // client to server; closed by CloseSend
	down  chan []byte // server to client
	ended chan struct{}
	final []byte // the handler's closing message (nil: none)
	err   error  // the handler's error; set before ended closes

	closeOnce       sync.Once
	mu              sync.Mutex
	header, trailer metadata.MD
}

func decode(b []byte, msg proto.Struct) error { return proto.Unmarshal(proto.Binary, b, nil, msg) }

func (p *pipe) send(ch chan []byte, msg proto.Struct) error {
	b, err := proto.Marshal(proto.Binary, nil, msg)
	if err != nil {
		return err
	}
	select {
	case ch <- b:
		return nil
	case <-p.ended:
		return io.EOF
	case <-p.ctx.Done():
		if p.isEnded() {
			return io.EOF
		}
		return p.ctx.Err()
	}
}

// isEnded: ended closes before the handler's end cancels the context.
func (p *pipe) isEnded() bool {
	select {
	case <-p.ended:
		return true
	default:
		return false
	}
}

type clientEnd struct {
	*pipe
	final proto.Struct
}

func (c *clientEnd) Context() context.Context { return c.ctx }

func (c *clientEnd) Header() (metadata.MD, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.header), nil
}

func (c *clientEnd) Trailer() metadata.MD {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.trailer)
}

func (c *clientEnd) SendMsg(msg proto.Struct) error { return c.send(c.up, msg) }

func (c *clientEnd) RecvMsg(msg proto.Struct) error {
	select {
	case b := <-c.down:
		return decode(b, msg)
	case <-c.ended:
		return c.end()
	case <-c.ctx.Done():
		if c.isEnded() { // the handler's end canceled the context
			return c.end()
		}
		return c.ctx.Err()
	}
}

// end is RecvMsg after the handler returned: its error, or io.EOF with
// its closing message decoded into final.
func (c *clientEnd) end() error {
	if c.err != nil {
		return c.err
	}
	if c.pipe.final != nil {
		if err := decode(c.pipe.final, c.final); err != nil {
			return err
		}
	}
	return io.EOF
}

func (c *clientEnd) CloseSend() error {
	c.closeOnce.Do(func() { close(c.up) })
	return nil
}

type serverEnd struct{ *pipe }

func (s serverEnd) Context() context.Context { return s.ctx }

func (s serverEnd) SendHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = maps.Clone(md)
	return nil
}

func (s serverEnd) SetTrailer(md metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trailer == nil {
		s.trailer = metadata.MD{}
	}
	maps.Copy(s.trailer, md)
}

func (s serverEnd) SendMsg(msg proto.Struct) error { return s.send(s.down, msg) }

func (s serverEnd) RecvMsg(msg proto.Struct) error {
	select {
	case b, ok := <-s.up:
		if !ok {
			return io.EOF
		}
		return decode(b, msg)
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}
