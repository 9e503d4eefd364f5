package client_test

import (
	"context"
	"testing"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// BenchmarkHeaders measures what headers cost a small TCP call: none at
// all (WithoutRequestIDs), the default generated request id, and a
// traceparent-sized header set besides.
func BenchmarkHeaders(b *testing.B) {
	args := &wiretest.EchoArgs{Msg: "hello, benchmark"}
	tp := metadata.Pairs("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	cases := []struct {
		name string
		opts []client.Option
		md   metadata.MD
	}{
		{"none", []client.Option{client.WithoutRequestIDs()}, nil},
		{"request-id", nil, nil},
		{"request-id+traceparent", nil, tp},
	}
	for _, tc := range cases {
		for _, par := range []bool{false, true} {
			name := tc.name + "/seq"
			if par {
				name = tc.name + "/par64"
			}
			b.Run(name, func(b *testing.B) {
				ts := serve(b, "")
				c := dial(b, ts.addr, tc.opts...)
				wrap := func(ctx context.Context) context.Context {
					if tc.md != nil {
						return metadata.NewOutgoingContext(ctx, tc.md)
					}
					return ctx
				}
				if par {
					benchPar(b, func(ctx context.Context, _ int) error { _, err := echo(wrap(ctx), c, args); return err })
					return
				}
				benchSeq(b, func(ctx context.Context) error { _, err := echo(wrap(ctx), c, args); return err })
			})
		}
	}
}
