package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/bench/gen/atb"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// TestBorrowedKeptByInterceptor: interceptors may keep what they are
// given, so a Conn with interceptors gets fresh values for every call: the
// arguments an interceptor kept are still its calls' own after later calls.
func TestBorrowedKeptByInterceptor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var kept []*atb.EchoEchoArgs
	keep := func(ctx context.Context, m *client.Method, args, result proto.Struct, next client.Invoker) error {
		kept = append(kept, args.(*atb.EchoEchoArgs))
		return next(ctx, m, args, result)
	}
	c := serveEcho(ctx, t, copyEcho{}, nil, client.WithInterceptors(keep))
	for i := range 10 {
		p := []byte{byte(i)}
		require.NoError(t, c.EchoBorrowed(ctx, p, func(r []byte) error {
			assert.Equal(t, p, r)
			return nil
		}))
	}
	require.Len(t, kept, 10)
	for i, a := range kept {
		assert.Equal(t, []byte{byte(i)}, a.Payload, "call %d's arguments", i)
	}
}
