package server_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// fakeRegistrar records its calls; while deregistering it checks that
// the server still accepts connections (clients are told first).
type fakeRegistrar struct {
	mu           sync.Mutex
	registered   []string
	regCtx       context.Context
	deregistered int
	acceptedThen error // dialing the server from inside Deregister
	refuse       error
}

func (f *fakeRegistrar) Register(ctx context.Context, addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return f.refuse
	}
	f.registered = append(f.registered, addr)
	f.regCtx = ctx
	return nil
}

func (f *fakeRegistrar) Deregister(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deregistered++
	if len(f.registered) > 0 {
		c, err := net.DialTimeout("tcp", f.registered[0], testenv.HangGuard(5*time.Second))
		if err == nil {
			c.Close()
		}
		f.acceptedThen = err
	}
	return nil
}

func (f *fakeRegistrar) state() (addrs []string, regCtx context.Context, deregs int, acceptedThen error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.registered...), f.regCtx, f.deregistered, f.acceptedThen
}

func TestRegistrar(t *testing.T) {
	serve := func(t *testing.T, r server.Registrar) (*server.Server, net.Listener, chan error) {
		s := server.New(server.WithLogger(quiet), server.WithRegistrar(r))
		s.Register(wiretest.NewEcho().Service())
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- s.Serve(ln) }()
		return s, ln, served
	}
	returned := func(t *testing.T, served chan error) error {
		select {
		case err := <-served:
			return err
		case <-time.After(testenv.HangGuard(10 * time.Second)):
			t.Fatal("Serve did not return")
			return nil
		}
	}
	t.Run("shutdown withdraws first", func(t *testing.T) {
		f := &fakeRegistrar{}
		s, ln, served := serve(t, f)
		require.Eventually(t, func() bool { a, _, _, _ := f.state(); return len(a) == 1 }, testenv.HangGuard(10*time.Second), time.Millisecond)
		addrs, regCtx, _, _ := f.state()
		require.Equal(t, []string{ln.Addr().String()}, addrs)
		_, err := echo(tctx(t), dial(t, addrs[0]), &wiretest.EchoArgs{Msg: "hi"})
		require.NoError(t, err)
		require.NoError(t, s.Shutdown(tctx(t)))
		require.ErrorIs(t, returned(t, served), server.ErrServerClosed)
		require.NoError(t, s.Close())
		_, _, deregs, acceptedThen := f.state()
		require.Equal(t, 1, deregs, "once, though Close followed Shutdown")
		require.NoError(t, acceptedThen, "the listener is open while the server withdraws")
		require.ErrorIs(t, regCtx.Err(), context.Canceled, "Register's context ends at the withdrawal")
	})
	t.Run("close withdraws", func(t *testing.T) {
		f := &fakeRegistrar{}
		s, _, served := serve(t, f)
		require.Eventually(t, func() bool { a, _, _, _ := f.state(); return len(a) == 1 }, testenv.HangGuard(10*time.Second), time.Millisecond)
		require.NoError(t, s.Close())
		require.ErrorIs(t, returned(t, served), server.ErrServerClosed)
		_, _, deregs, _ := f.state()
		require.Equal(t, 1, deregs)
	})
	t.Run("refused address fails Serve", func(t *testing.T) {
		refused := errors.New("registry: no such address")
		f := &fakeRegistrar{refuse: refused}
		s, ln, served := serve(t, f)
		require.ErrorIs(t, returned(t, served), refused)
		_, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		require.Error(t, err, "the listener is closed")
		require.NoError(t, s.Close())
	})
}
