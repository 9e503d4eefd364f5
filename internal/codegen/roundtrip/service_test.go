package roundtrip_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/exceptions/exceptions"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/exceptions/exceptions/exceptionsserver"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/extends/ext/base"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/extends/ext/child"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/extends/ext/child/childserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// store implements the generated exceptions.StoreHandler.
type store struct{}

func (store) Get(ctx context.Context, id int64) (string, error) {
	switch id {
	case 1:
		return "one", nil
	case 2:
		return "", &exceptions.NotFound{Message: "no such id", ID: id}
	}
	return "", errors.New("boom")
}

func (store) Put(ctx context.Context, id int64, v string) error {
	if v == "" {
		return &exceptions.Invalid{Reason: "empty", Fields: []string{"v"}}
	}
	return nil
}

func (store) Clear(ctx context.Context) error {
	return &exceptions.Empty{}
}

// family implements child.ChildHandler, including the functions inherited
// from base.Base (another package) and Middle.
type family struct {
	mu     sync.Mutex
	pinged chan struct{}
}

func (f *family) Info(ctx context.Context, id int32) (*base.Info, error) {
	if id < 0 {
		return nil, &base.BaseError{Msg: "negative"}
	}
	if id == 0 {
		return nil, nil // no result: the client sees MISSING_RESULT
	}
	return &base.Info{Name: "info"}, nil
}

func (f *family) Ping(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case f.pinged <- struct{}{}:
	default:
	}
	return nil
}

func (f *family) Count(ctx context.Context) (int32, error) { return 42, nil }

func (f *family) Name(ctx context.Context, info *base.Info) (string, error) {
	return "child of " + info.GetName(), nil
}

func serve(t *testing.T, register func(*server.Server)) *client.Conn {
	t.Helper()
	srv := server.New()
	register(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return conn
}

func TestGeneratedServiceExceptions(t *testing.T) {
	conn := serve(t, func(s *server.Server) { exceptionsserver.RegisterStore(s, store{}) })
	c := exceptions.NewStoreClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	v, err := c.Get(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "one", v)

	_, err = c.Get(ctx, 2)
	var nf *exceptions.NotFound
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, int64(2), nf.ID)

	_, err = c.Get(ctx, 3)
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae, "an undeclared error travels as an application exception")
	assert.Equal(t, int32(proto.ExcInternalError), ae.Type)

	require.NoError(t, c.Put(ctx, 1, "x"))
	err = c.Put(ctx, 1, "")
	var inv *exceptions.Invalid
	require.ErrorAs(t, err, &inv)
	assert.Equal(t, "empty", inv.Reason)

	var empty *exceptions.Empty
	require.ErrorAs(t, c.Clear(ctx), &empty)
}

func TestGeneratedServiceExtends(t *testing.T) {
	h := &family{pinged: make(chan struct{}, 1)}
	conn := serve(t, func(s *server.Server) { childserver.RegisterChild(s, h) })
	c := child.NewChildClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	info, err := c.Info(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "info", info.Name)

	_, err = c.Info(ctx, -1)
	var be *base.BaseError
	require.ErrorAs(t, err, &be)

	_, err = c.Info(ctx, 0)
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, int32(proto.ExcMissingResult), ae.Type)

	n, err := c.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int32(42), n)

	name, err := c.Name(ctx, &base.Info{Name: "x"})
	require.NoError(t, err)
	assert.Equal(t, "child of x", name)

	require.NoError(t, c.Ping(ctx))
	select {
	case <-h.pinged:
	case <-ctx.Done():
		t.Fatal("oneway ping never reached the handler")
	}

	// The hint table carries inherited functions and the child's hints.
	require.NotNil(t, child.ChildHints.Function("info"))
	assert.Equal(t, 50*time.Millisecond, child.ChildHints.Function("name").Client.Timeout)
}
