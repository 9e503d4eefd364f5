package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A HatRPC client against a plain Apache Thrift server: the handshake gets
// UNKNOWN_METHOD and the connection carries on as plain Thrift.
func TestHandshakeFallbackToApache(t *testing.T) {
	cases := []struct {
		framed, compact bool
	}{{false, false}, {true, false}, {false, true}, {true, true}}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("framed=%v/compact=%v", tc.framed, tc.compact), func(t *testing.T) {
			proc := &wiretest.ApacheProcessor{Fired: make(chan string, 4), Names: make(chan string, 16)}
			as, err := wiretest.StartApache(proc, tc.framed, tc.compact)
			require.NoError(t, err)
			defer func() { require.NoError(t, as.Stop()) }()
			opts := []client.Option{}
			if tc.framed {
				opts = append(opts, client.WithFramed())
			}
			if tc.compact {
				opts = append(opts, client.WithCompact())
			}
			c := dial(t, as.Addr, opts...)
			require.False(t, c.Upgraded())
			require.Equal(t, "__hatrpc_hello", <-proc.Names)

			// Pipelined calls from many goroutines over the plain connection.
			errs := make(chan error, 16)
			for i := range 16 {
				go func() {
					msg := fmt.Sprintf("m%d", i)
					got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: msg})
					if err == nil && got != msg {
						err = fmt.Errorf("got %q want %q", got, msg)
					}
					errs <- err
				}()
			}
			for range 16 {
				require.NoError(t, <-errs)
			}
			require.NoError(t, c.Call(tctx(t), wiretest.FireMethod, &wiretest.EchoArgs{Msg: "fired"}, nil))
			got := recvWithin(t, proc.Fired, 5*time.Second, "oneway not delivered")
			require.Equal(t, "fired", got)
			err = c.Call(tctx(t), &client.Method{Name: "missing"}, &wiretest.EchoArgs{}, &wiretest.EchoResult{})
			require.ErrorIs(t, err, &proto.ApplicationException{Type: proto.ExcUnknownMethod})
			require.NoError(t, c.Close())
		})
	}
}

// Apache's multiplexed processor drops the connection on a name without a
// service prefix; the client redials as plain Thrift and multiplexes.
func TestHandshakeFallbackToApacheMultiplexed(t *testing.T) {
	mp := thrift.NewTMultiplexedProcessor()
	proc := &wiretest.ApacheProcessor{Names: make(chan string, 16)}
	mp.RegisterProcessor("Echo", proc)
	as, err := wiretest.StartApache(mp, true, false)
	require.NoError(t, err)
	defer func() { require.NoError(t, as.Stop()) }()
	c := dial(t, as.Addr, client.WithFramed(), client.WithMultiplexed())
	require.False(t, c.Upgraded())
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "mux"})
	require.NoError(t, err)
	require.Equal(t, "mux", got)
	require.Equal(t, "echo", <-proc.Names) // prefix stripped by Apache's demultiplexer
	require.NoError(t, c.Close())
}
