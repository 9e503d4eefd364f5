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
