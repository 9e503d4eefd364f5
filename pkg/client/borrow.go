package client

import (
	"context"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Borrowed results: the client-side counterpart of the server's
// borrow_args hint. A result the caller owns costs an allocation and a
// copy into cold memory per binary value, the larger part of a 4 KiB
// call's client CPU once the server borrows its arguments; a caller that
// only looks at the result can instead read it in place, in the reply's
// frame buffer, which then goes back to its pool (atb-tcp, 64 callers,
// 2026-11-24: 4 KiB echoes 145-151k calls/s owned, 209-220k borrowed;
// 128 KiB 16.3-17.4k and 19.1-20.9k).

// CallBorrowed is Call for a caller that needs result only while use runs:
// binary values decoded into result may be slices of the reply's buffer,
// which is reused once use returns, instead of copies of the caller's own.
// use runs once, after a reply that decoded without error (an exception
// reply or a failed call returns its error and skips it), and what it
// returns is CallBorrowed's error. Copy (bytes.Clone) whatever must
// outlive use.
//
// Replies over TCP, rdma/shm lanes and FLOCK are decoded in place (a
// lane's reply in the engine's registered memory, its lane held until use
// returns); batched lane replies, and every reply when the Conn has
// interceptors (which may read result after their invoker returns), are
// decoded into owned values as by Call, and use then runs on those.
func (c *Conn) CallBorrowed(ctx context.Context, m *Method, args, result proto.Struct, use func() error) error {
	if result == nil || m.Oneway || len(c.o.interceptors) > 0 {
		if err := c.Call(ctx, m, args, result); err != nil {
			return err
		}
		return use()
	}
	// The borrower travels in the request, not in a context value: no
	// allocation per call for it. Every route's decode runs use once
	// (session.finish, Conn.decodeFrame).
	return c.call(ctx, m, args, result, use)
}
