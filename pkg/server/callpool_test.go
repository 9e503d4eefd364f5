package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix/mixserver"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// prefixGet answers Get with "v:" and the key.
type prefixGet struct{}

func (prefixGet) Get(_ context.Context, key []byte) ([]byte, error) {
	return append([]byte("v:"), key...), nil
}

func (prefixGet) Slow(_ context.Context, ms int64) (int64, error) { return ms, nil }

// servePrefixGet serves the Shared service over TCP and dials it; fresh
// counts the call values Get allocates.
func servePrefixGet(t *testing.T, opts ...server.Option) (c *mix.SharedClient, fresh *atomic.Int64) {
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	mixserver.RegisterShared(s, prefixGet{})
	fresh = server.CountFreshCalls(s, "Shared:get")
	return mix.NewSharedClient(dial(t, serveOn(t, s), client.WithRDMA("off"))), fresh
}

// TestCallValuesPooled: concurrent TCP calls of a generated method reuse
// pooled call values (arguments and result together) without ever sharing
// one: each call gets its own key's answer, and few values are allocated.
// With an interceptor, which may keep arguments, nothing is pooled: every
// call allocates its value, and the arguments the interceptor kept still
// hold their call's key after every later call.
func TestCallValuesPooled(t *testing.T) {
	const callers, calls = 8, 150
	run := func(t *testing.T, c *mix.SharedClient) {
		testutil.InParallel(t, callers, func(g int) error {
			for i := range calls {
				key := fmt.Sprintf("%d/%d", g, i)
				v, err := c.Get(tctx(t), []byte(key))
				if err != nil {
					return err
				}
				if string(v) != "v:"+key {
					return fmt.Errorf("key %s answered %q", key, v)
				}
			}
			return nil
		})
	}
	pooled, fresh := servePrefixGet(t)
	run(t, pooled)
	// At most one value per call in flight at once, and, under the race
	// detector, whatever its sync.Pool dropped (a quarter of the Puts).
	require.Less(t, fresh.Load(), int64(callers*calls/2), "call values allocated")

	var mu sync.Mutex
	kept := map[string]*mix.SharedGetArgs{}
	keep := func(ctx context.Context, _ *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		if a, ok := args.(*mix.SharedGetArgs); ok {
			mu.Lock()
			kept[string(a.Key)] = a
			mu.Unlock()
		}
		return next(ctx, args)
	}
	intercepted, fresh := servePrefixGet(t, server.WithInterceptors(keep))
	run(t, intercepted)
	require.Equal(t, int64(callers*calls), fresh.Load(), "with interceptors every call has a value of its own")
	// Under mu: the interceptor wrote kept on the server's goroutines, and
	// the replies that followed crossed a socket, which the race detector
	// does not count as an order.
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, kept, callers*calls)
	for key, a := range kept {
		require.Equal(t, key, string(a.Key), "kept arguments changed after their call")
	}
}
