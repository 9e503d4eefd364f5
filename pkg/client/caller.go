package client

import (
	"context"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Caller is what generated clients call through: a *Conn talks to one
// server, a cluster.Client (pkg/cluster) to many, and either can be handed
// to a generated NewXClient unchanged.
type Caller interface {
	// Call invokes m with args and decodes the reply into result (nil
	// for oneway methods).
	Call(ctx context.Context, m *Method, args, result proto.Struct) error
	// CallBorrowed is Call for a caller that reads result only while use
	// runs (see Conn.CallBorrowed).
	CallBorrowed(ctx context.Context, m *Method, args, result proto.Struct, use func() error) error
}

var _ Caller = (*Conn)(nil)

// Reuser is a Caller that can promise to keep no reference to a call's
// arguments, result or borrower once CallBorrowed has returned, and never
// to write the result after that: generated code then reuses them for
// its next call instead of allocating them (see hatgen's <Fn>Borrowed).
type Reuser interface {
	ReusesValues() bool
}

// ReusesValues reports that c keeps nothing of a call once it returns: on
// every route the arguments are encoded and the reply decoded on the
// caller's goroutine, before the call returns. Interceptors may keep
// anything they were given, so a Conn with interceptors does not promise.
func (c *Conn) ReusesValues() bool { return reusesValues(&c.o) }

// ReusesValuesWith reports whether a Conn dialed with opts makes the
// ReusesValues promise: what a Caller over many Conns built from the same
// options (cluster.Client) can promise before it has dialed any.
func ReusesValuesWith(opts ...Option) bool {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	return reusesValues(&o)
}

func reusesValues(o *options) bool { return len(o.interceptors) == 0 }

var _ Reuser = (*Conn)(nil)
