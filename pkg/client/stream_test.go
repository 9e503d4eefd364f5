package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A stream needs a HatRPC peer that negotiated streams: on anything else
// NewStream says so, naming the peer, and the Conn's calls go on.
func TestStreamNeedsHatRPCPeer(t *testing.T) {
	m := &client.Method{Service: "S", Name: "echo", Stream: stream.Bidi}
	tests := []struct {
		name string
		addr func(t *testing.T) string
		opts []client.Option
		want string
	}{
		{"apache unframed binary", func(t *testing.T) string { return apache(t, false, false) }, nil,
			"is a plain Thrift server (unframed-binary)"},
		{"apache framed compact", func(t *testing.T) string { return apache(t, true, true) }, []client.Option{client.WithFramed(), client.WithCompact()},
			"is a plain Thrift server (framed-compact)"},
		{"hatrpc without upgrade", func(t *testing.T) string { return serve(t, "", server.WithoutUpgrade()).addr }, nil,
			"is a plain Thrift server (unframed-binary)"},
		{"theader", func(t *testing.T) string { return serve(t, "").addr }, []client.Option{client.WithTHeader()},
			"speaks THeader (theader)"},
		{"http", func(t *testing.T) string { return "http://" + serve(t, "").addr }, nil,
			"is Thrift over HTTP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := tt.addr(t)
			c := dial(t, addr, tt.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
			defer cancel()
			st, err := c.NewStream(ctx, m, &wiretest.EchoResult{})
			require.Nil(t, st)
			require.ErrorIs(t, err, stream.ErrNeedsHatRPCPeer)
			require.Contains(t, err.Error(), tt.want)
			require.Contains(t, err.Error(), "stream: streaming needs a HatRPC peer: ")
		})
	}
}

func apache(t *testing.T, framed, compact bool) string {
	proc := &wiretest.ApacheProcessor{Fired: make(chan string, 4), Names: make(chan string, 16)}
	as, err := wiretest.StartApache(proc, framed, compact)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, as.Stop()) })
	return as.Addr
}

func TestNewStreamOfUnaryFunction(t *testing.T) {
	ts := serve(t, "")
	c := dial(t, ts.addr)
	_, err := c.NewStream(context.Background(), wiretest.EchoMethod, &wiretest.EchoResult{})
	require.EqualError(t, err, "client: echo is not a streaming function: call it")
}
