package generic

import (
	"context"
	"fmt"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// Exception is a declared exception: a call's error when the server threw
// one, and what a generic server's handler returns to throw one.
type Exception struct {
	// Field is the name in the function's throws clause ("missing");
	// Type the exception's IDL name ("NotFound"). A handler may set
	// either.
	Field, Type string
	// Value holds the exception's fields by name (as Client.Call returns
	// values); JSON is the same as a JSON object. A handler sets one.
	Value map[string]any
	JSON  []byte
}

func (e *Exception) Error() string {
	return e.Type + " " + string(e.JSON)
}

// Client calls the functions of one service through any client.Caller (a
// *client.Conn, a cluster.Client): the Conn's framing and protocol
// detection, THeader, TLS, headers and fast path apply as to generated
// clients.
type Client struct {
	svc     *Service
	c       client.Caller
	mu      sync.Mutex
	methods map[string]*method
}

type method struct {
	sh *shapes
	m  client.Method
}

// NewClient returns a client of svc over c.
func NewClient(svc *Service, c client.Caller) *Client {
	return &Client{svc: svc, c: c, methods: map[string]*method{}}
}

func (c *Client) method(name string) (*method, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.methods[name]; ok {
		return m, nil
	}
	fn, err := c.svc.Function(name)
	if err != nil {
		return nil, err
	}
	m := &method{sh: shapesOf(fn), m: client.Method{
		Service: c.svc.Name(), Name: fn.Name, Oneway: fn.Oneway, Hints: c.svc.Hints.Function(fn.Name), Stream: fn.Stream,
	}}
	c.methods[name] = m
	return m, nil
}

// Call invokes method with args keyed by argument name (values as
// docs/generic.md maps them) and returns the result: nil for void and
// oneway functions, a declared exception as *Exception, anything else
// the server answered with as *proto.ApplicationException.
func (c *Client) Call(ctx context.Context, method string, args map[string]any) (any, error) {
	_, v, err := c.call(ctx, method, args)
	return v, err
}

// CallJSON is Call with the arguments as a JSON object and the result as
// JSON ("null" for void and oneway functions).
func (c *Client) CallJSON(ctx context.Context, method string, args []byte) ([]byte, error) {
	obj, err := object("args", args)
	if err != nil {
		return nil, err
	}
	m, v, err := c.call(ctx, method, obj)
	if err != nil {
		return nil, err
	}
	if m.sh.void || m.m.Oneway {
		return []byte("null"), nil
	}
	return appendJSON(nil, v, m.sh.fn.Returns), nil
}

func (c *Client) call(ctx context.Context, name string, args map[string]any) (*method, any, error) {
	m, err := c.method(name)
	if err != nil {
		return nil, nil, err
	}
	if m.sh.fn.Stream != stream.None {
		return m, nil, fmt.Errorf("generic: %s.%s streams (%s): open it with Stream", c.svc.Name(), name, m.sh.fn.Stream)
	}
	lim := &c.svc.idl.lim
	in := &body{s: m.sh.args, lim: lim, path: "args", in: args}
	if err := in.check(); err != nil {
		return m, nil, err
	}
	if m.m.Oneway {
		return m, nil, c.c.Call(ctx, &m.m, in, nil)
	}
	res := &body{s: m.sh.result, lim: lim, path: "result", throws: m.sh.fn.Throws}
	if err := c.c.Call(ctx, &m.m, in, res); err != nil {
		return m, nil, err
	}
	for _, f := range m.sh.fn.Throws {
		if v, ok := res.out[f.Name]; ok {
			obj, _ := v.(map[string]any)
			return m, nil, &Exception{Field: f.Name, Type: f.Type.TrueType().Name, Value: obj, JSON: appendJSON(nil, v, f.Type)}
		}
	}
	if m.sh.void {
		return m, nil, nil
	}
	v, ok := res.out["success"]
	if !ok {
		return m, nil, &proto.ApplicationException{Type: proto.ExcMissingResult, Message: name + " failed: unknown result"}
	}
	return m, v, nil
}

// Functions lists the service's functions, as Call takes their names.
func (c *Client) Functions() []*idl.Function { return c.svc.Functions() }
