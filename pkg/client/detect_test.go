package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestDefaultClientDetectsStack: a client with no framing or protocol
// option finds Apache's TSimpleServer in each of the four stacks and
// calls it, and a reconnect goes straight to the stack found.
func TestDefaultClientDetectsStack(t *testing.T) {
	for _, tc := range []struct{ framed, compact bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("framed=%v/compact=%v", tc.framed, tc.compact), func(t *testing.T) {
			proc := &wiretest.ApacheProcessor{Names: make(chan string, 16)}
			as, err := wiretest.StartApache(proc, tc.framed, tc.compact)
			require.NoError(t, err)
			defer func() { require.NoError(t, as.Stop()) }()
			// A probe that stalled would run into the handshake timeout
			// (a minute) and fail the Dial at its 20 s context.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, as.Addr, client.WithHandshakeTimeout(time.Minute))
			require.NoError(t, err)
			defer c.Close()
			assert.False(t, c.Upgraded())
			for i := range 3 {
				msg := fmt.Sprintf("call %d", i)
				got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: msg})
				require.NoError(t, err)
				assert.Equal(t, msg, got)
			}
		})
	}
}

// TestDefaultClientMultiplexedFallback: Apache's multiplexed processor
// without a default service hangs up on the handshake in every stack; the
// default client ends up plain, unframed binary, and multiplexes.
func TestDefaultClientMultiplexedFallback(t *testing.T) {
	mp := thrift.NewTMultiplexedProcessor()
	proc := &wiretest.ApacheProcessor{Names: make(chan string, 16)}
	mp.RegisterProcessor("Echo", proc)
	as, err := wiretest.StartApache(mp, false, false)
	require.NoError(t, err)
	defer func() { require.NoError(t, as.Stop()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, as.Addr, client.WithMultiplexed(), client.WithHandshakeTimeout(time.Minute))
	require.NoError(t, err)
	defer c.Close()
	assert.False(t, c.Upgraded())
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "mux"})
	require.NoError(t, err)
	assert.Equal(t, "mux", got)
	assert.Equal(t, "echo", <-proc.Names)
}

// TestDefaultClientUpgradesHatServer: against a HatRPC server the first
// handshake upgrades; nothing is probed.
func TestDefaultClientUpgradesHatServer(t *testing.T) {
	ts := serve(t, "127.0.0.1:0")
	c := dial(t, ts.addr)
	assert.True(t, c.Upgraded())
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "hat"})
	require.NoError(t, err)
	assert.Equal(t, "hat", got)
}

// TestFixedStackIsNotProbed: WithFramed fixes the stack, so an unframed
// server that hangs up on it is not probed: the Conn falls back to plain
// framed Thrift, whose first call fails.
func TestFixedStackIsNotProbed(t *testing.T) {
	proc := &wiretest.ApacheProcessor{Names: make(chan string, 16)}
	as, err := wiretest.StartApache(proc, true, false)
	require.NoError(t, err)
	defer func() { require.NoError(t, as.Stop()) }()
	c := dial(t, as.Addr, client.WithUnframed())
	assert.False(t, c.Upgraded())
	_, err = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "x"})
	require.ErrorIs(t, err, client.ErrConnClosed)
}

func TestDialErrorsSayWhatHappened(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		_, err = client.Dial(tctx(t), addr)
		require.Error(t, err)
		assert.Equal(t, "client: dial tcp "+addr+": connect: connection refused", err.Error())
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		var ce *client.ConnError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "dial", ce.Op)
	})

	t.Run("HTTP", func(t *testing.T) {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		defer hs.Close()
		addr := hs.Listener.Addr().String()
		_, err := client.Dial(tctx(t), addr)
		require.Error(t, err)
		assert.Equal(t, `client: HTTP server on the port `+addr+`, not Thrift (it answered "HTTP/1.1 400 Bad Request"); for Thrift over HTTP: dial http://`+addr+`/<path>`, err.Error())
		assert.ErrorIs(t, err, client.ErrHTTPServer)
		assert.ErrorIs(t, err, client.ErrNotThrift)
		assert.NotErrorIs(t, err, client.ErrConnClosed)
	})

	t.Run("not Thrift", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
			_, _ = nc.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
			_, _ = nc.Read(make([]byte, 1024))
		}()
		_, err = client.Dial(tctx(t), ln.Addr().String())
		require.Error(t, err)
		assert.Equal(t, "client: "+ln.Addr().String()+` is not a Thrift server: its answer begins "SSH-2.0-OpenSSH_9.6\r\n"`, err.Error())
		var nt *client.NotThriftError
		require.ErrorAs(t, err, &nt)
		assert.False(t, nt.HTTP)
		assert.ErrorIs(t, err, client.ErrNotThrift)
		assert.NotErrorIs(t, err, client.ErrHTTPServer)
		<-done
	})
}
