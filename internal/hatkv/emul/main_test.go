package emul

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 30 * time.Second

// testCtx is a test's hang guard, scaled in the emulated guest
// (testenv.HangGuard).
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(d))
	t.Cleanup(cancel)
	return ctx
}

func openDevice(t testing.TB) *rdma.Device {
	t.Helper()
	d, err := rdma.Open(rdma.WithProvider(fastpathtest.Provider()), rdma.WithShmSize(1<<30),
		rdma.WithRNRTimer(20*time.Microsecond), rdma.WithPeerCheck(2*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

func openStore(t testing.TB) *kvstore.Store {
	t.Helper()
	st, err := kvstore.Open(testCtx(t, testTimeout), t.TempDir(), kvstore.WithSync(kvstore.SyncNoSync),
		kvstore.WithMapSize(256<<20))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// env is a store, a device and an emulation server on them.
type env struct {
	dev   *rdma.Device
	store *kvstore.Store
	srv   *Server
	done  chan struct{} // closed when every ServeConn has returned
	errs  chan error
	live  int
}

func newEnv(t testing.TB, opts ...ServerOption) *env {
	t.Helper()
	e := &env{dev: openDevice(t), store: openStore(t), errs: make(chan error, 256)}
	opts = append([]ServerOption{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithIndexCapacity(1 << 14), WithValueArea(16 << 20)}, opts...)
	var err error
	e.srv, err = NewServer(testCtx(t, testTimeout), e.dev, e.store, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		err := e.srv.Close()
		if err != nil {
			require.ErrorIs(t, err, ErrServerClosed)
		}
		for range e.live {
			require.NoError(t, <-e.errs)
		}
	})
	return e
}

// dial connects a client over an in-memory conn, the server side served
// by ServeConn on its own goroutine.
func (e *env) dial(t testing.TB, kind Kind, opts ...ClientOption) *Client {
	t.Helper()
	nc, err := e.conn(testCtx(t, testTimeout))
	require.NoError(t, err)
	c, err := Dial(testCtx(t, testTimeout), e.dev, nc, kind, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			require.ErrorIs(t, err, ErrClosed)
		}
	})
	return c
}

func (e *env) conn(context.Context) (net.Conn, error) {
	a, b := net.Pipe()
	e.live++
	go func() { e.errs <- e.srv.ServeConn(context.Background(), b) }()
	return a, nil
}
