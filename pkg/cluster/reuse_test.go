package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// hideReuse is a Caller that makes no promise: generated calls through it
// allocate their values, as through a Client before it was a Reuser.
type hideReuse struct{ client.Caller }

// TestClientReusesValues: a Client promises what its Conns promise, so
// borrowed calls through it reuse their values (fewer allocations than
// through the same Client hiding the promise), and concurrent borrowed
// calls each still see their own result. With an
// interceptor, which may keep what it is given, it promises nothing and
// every call's arguments stay their own.
func TestClientReusesValues(t *testing.T) {
	h := newStoreHandler()
	a, b := startServer(t, h), startServer(t, h)
	ctx := tctx(t, 60*time.Second)

	cl := dialCluster(t, []string{a.addr, b.addr}, fastOptions()...)
	require.True(t, cl.ReusesValues())
	kv := store.NewStoreClient(cl)
	blob := func(kv *store.StoreClient, size int32) func() {
		return func() {
			err := kv.BlobBorrowed(ctx, size, func(r []byte) error {
				if len(r) != int(size) {
					t.Errorf("blob of %d bytes, want %d", len(r), size)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}
	}
	reused := testutil.AllocsPerCall(1000, blob(kv, 64))
	fresh := testutil.AllocsPerCall(1000, blob(store.NewStoreClient(hideReuse{cl}), 64))
	conn, err := client.Dial(ctx, a.addr)
	require.NoError(t, err)
	defer conn.Close()
	direct := testutil.AllocsPerCall(1000, blob(store.NewStoreClient(conn), 64))
	t.Logf("allocations a borrowed call (the in-process server's included): %.2f through the Client, %.2f without its promise, %.2f through a Conn", reused, fresh, direct)
	// Without the promise a call allocates its values and their closure;
	// the Client allocates nothing of its own (its breaker runs the call
	// through Execute, whose closure stays on the stack; gobreaker's Allow
	// allocated one). Under the race detector each of the two pools (the
	// generated call's, the Client's use tracker) allocates its value and
	// closure again on a quarter of the calls: +0.5 each.
	own := 0.0
	if testenv.Race {
		own += 1.0
	}
	assert.GreaterOrEqual(t, fresh-reused, 1.0, "the promise saves the call's values")
	assert.LessOrEqual(t, reused, direct+own+0.5, "the Client allocates nothing of its own")

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				blob(kv, int32(g*100+i))()
			}
		})
	}
	wg.Wait()

	var mu sync.Mutex
	var kept []*store.StoreBlobArgs
	keep := func(ctx context.Context, m *client.Method, args, result proto.Struct, next client.Invoker) error {
		if ba, ok := args.(*store.StoreBlobArgs); ok {
			mu.Lock()
			kept = append(kept, ba)
			mu.Unlock()
		}
		return next(ctx, m, args, result)
	}
	ci := dialCluster(t, []string{a.addr, b.addr}, fastOptions(WithConnOptions(client.WithInterceptors(keep)))...)
	require.False(t, ci.ReusesValues())
	kvi := store.NewStoreClient(ci)
	for i := range 10 {
		blob(kvi, int32(i))()
	}
	require.Len(t, kept, 10)
	for i, ba := range kept {
		assert.Equal(t, int32(i), ba.Size, "call %d's arguments", i)
	}
}
