package client_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// Apache's Go client over TZlibTransport (on the socket, or over
// TFramedTransport) calls a HatRPC server, which detects the zlib stream
// and answers compressed the same way.
func TestZlibApacheClientToHatRPC(t *testing.T) {
	ts := serve(t, "")
	for _, framed := range []bool{false, true} {
		for _, compact := range []bool{false, true} {
			t.Run(fmt.Sprintf("framed=%v/compact=%v", framed, compact), func(t *testing.T) {
				ac, err := wiretest.DialApacheZlib(ts.addr, framed, compact)
				require.NoError(t, err)
				defer ac.Close()
				for i := range 3 { // several messages in one stream
					msg := fmt.Sprintf("zlib %d %s", i, strings.Repeat("z", i*5000))
					got, err := ac.Echo(tctx(t), msg)
					require.NoError(t, err)
					require.Equal(t, msg, got)
				}
			})
		}
	}
}

// client.WithZlib speaks TZlibTransport to Apache's Go server and to a
// HatRPC server, binary or compact, framed or not inside.
func TestZlibClient(t *testing.T) {
	ts := serve(t, "")
	apache := map[bool]string{}
	for _, compact := range []bool{false, true} {
		as, err := wiretest.StartApacheZlib(&wiretest.ApacheProcessor{}, compact)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, as.Stop()) })
		apache[compact] = as.Addr
	}
	cases := []struct {
		name string
		addr string
		opts []client.Option
	}{
		{"apache-binary", apache[false], []client.Option{client.WithZlib()}},
		{"apache-compact", apache[true], []client.Option{client.WithZlib(), client.WithCompact()}},
		{"hatrpc-binary", ts.addr, []client.Option{client.WithZlib()}},
		{"hatrpc-framed-compact", ts.addr, []client.Option{client.WithZlib(), client.WithFramed(), client.WithCompact()}},
		{"hatrpc-theader", ts.addr, []client.Option{client.WithTHeader(), client.WithZlib()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, tc.addr, tc.opts...)
			require.False(t, c.Upgraded())
			for i := range 3 {
				msg := fmt.Sprintf("to %s %d %s", tc.name, i, strings.Repeat("y", i*40000))
				got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: msg})
				require.NoError(t, err)
				require.Equal(t, msg, got)
			}
			require.NoError(t, c.Close())
		})
	}
}
