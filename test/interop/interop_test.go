package interop_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	hg "github.com/hatrpc/hatrpc/test/gen/interop"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// hatOptions are the client options that speak stack s to a plain Thrift
// server.
func hatOptions(s testutil.Stack) []client.Option {
	var opts []client.Option
	if s.Framing == testutil.Framed {
		opts = append(opts, client.WithFramed())
	} else {
		opts = append(opts, client.WithUnframed())
	}
	switch s.Protocol {
	case testutil.Compact:
		opts = append(opts, client.WithCompact())
	case testutil.JSON:
		opts = append(opts, client.WithProtocol(proto.JSON))
	}
	return opts
}

func dialHat(t *testing.T, addr string, opts ...client.Option) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

// TestApacheGoClientToHatServer: Apache Thrift's Go client (Apache's own
// generated code) calls a HatRPC server running hatgen's generated code.
func TestApacheGoClientToHatServer(t *testing.T) {
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			srv, _ := testutil.StartHatInterop(t)
			testutil.RunApacheClientSuite(t, testutil.DialApache(t, srv.Addr, s))
		})
	}
}

// TestPythonClientToHatServer: Python's Thrift library (Debian's
// python3-thrift, code generated now by Debian's thrift compiler) calls a
// HatRPC server.
func TestPythonClientToHatServer(t *testing.T) {
	gen := testutil.GenPython(t)
	srv, _ := testutil.StartHatInterop(t)
	stacks := append(append(append([]testutil.Stack{}, testutil.Stacks...), testutil.PyHeaderStacks...), testutil.PyZlibStacks...)
	for _, s := range stacks {
		t.Run(s.String(), func(t *testing.T) {
			assert.Equal(t, testutil.PyChecks, testutil.RunPython(t, gen, srv.Addr, s))
		})
	}
}

// TestPythonClientOrder: Apache's Python client sends two oneway calls
// and then a call on one connection, 1,000 rounds in a row per stack, and
// every call finds both oneway calls done, in order, although the
// server's handlers dawdle at random: notify("5"), notify("6"),
// drainNotes() = ["5", "6"] on the Interop service, and issue 42's case,
// poke(5), poke(6), pokes() = 11 on testutil.Pokes.
func TestPythonClientOrder(t *testing.T) {
	gen := testutil.GenPython(t)
	interop, _ := testutil.StartHatInterop(t, server.WithInterceptors(testutil.Dawdle()))
	pokes := testutil.StartServerWith(t, func(s *server.Server) { s.Register(new(testutil.Pokes).Service()) })
	stacks := []testutil.Stack{
		{Framing: testutil.Framed, Protocol: testutil.Binary},
		{Framing: testutil.Buffered, Protocol: testutil.Compact},
		{Framing: testutil.Framed, Protocol: testutil.Compact},
		{Framing: testutil.Buffered, Protocol: testutil.Binary},
		{Framing: testutil.Framed, Protocol: testutil.Header},
	}
	for _, oc := range []struct {
		c    testutil.OrderCase
		addr string
	}{{testutil.OrderNotes, interop.Addr}, {testutil.OrderPokes, pokes.Addr}} {
		for _, s := range stacks {
			t.Run(string(oc.c)+"/"+s.String(), func(t *testing.T) {
				testutil.RunPythonOrder(t, gen, oc.addr, s, oc.c, 1000)
			})
		}
	}
}

// TestHatClientToApacheServer: hatgen's generated client calls Apache's
// TSimpleServer. The HatRPC handshake must fall back to plain Thrift.
func TestHatClientToApacheServer(t *testing.T) {
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			addr, _ := testutil.StartApacheServer(t, s)
			c := dialHat(t, addr, hatOptions(s)...)
			assert.False(t, c.Upgraded(), "an Apache server cannot speak HatRPC framing")
			testutil.RunHatClientSuite(t, hg.NewInteropClient(c))
		})
	}
}

// TestDefaultClientToPythonServer: a client with default options calls
// Apache's Python TSimpleServer (Debian's python3-thrift) in every stack,
// framed or not, binary or compact: it finds the stack by itself.
func TestDefaultClientToPythonServer(t *testing.T) {
	gen := testutil.GenPython(t)
	for _, s := range []testutil.Stack{
		{Framing: testutil.Framed, Protocol: testutil.Binary},
		{Framing: testutil.Buffered, Protocol: testutil.Binary},
		{Framing: testutil.Framed, Protocol: testutil.Compact},
		{Framing: testutil.Buffered, Protocol: testutil.Compact},
	} {
		t.Run(s.String(), func(t *testing.T) {
			addr := testutil.StartPythonServer(t, gen, s)
			c := dialHat(t, addr)
			assert.False(t, c.Upgraded(), "Python's server cannot speak HatRPC framing")
			testutil.RunHatClientSuite(t, hg.NewInteropClient(c))
		})
	}
}

// TestHatClientToHatServer: both ends HatRPC; the connection upgrades to
// HatRPC framing, and concurrent callers share it.
func TestHatClientToHatServer(t *testing.T) {
	tests := []struct {
		name     string
		opts     []client.Option
		upgraded bool
	}{
		{"upgraded", nil, true},
		{"upgraded compact", []client.Option{client.WithCompact()}, true},
		{"plain framed+binary", []client.Option{client.WithoutUpgrade(), client.WithFramed()}, false},
		{"plain buffered+compact", []client.Option{client.WithoutUpgrade(), client.WithUnframed(), client.WithCompact()}, false},
	}
	srv, _ := testutil.StartHatInterop(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialHat(t, srv.Addr, tt.opts...)
			assert.Equal(t, tt.upgraded, c.Upgraded())
			testutil.RunHatClientSuite(t, hg.NewInteropClient(c))
		})
	}

	t.Run("concurrent callers share one connection", func(t *testing.T) {
		ic := hg.NewInteropClient(dialHat(t, srv.Addr))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const callers, calls = 16, 50
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for g := 0; g < callers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < calls; i++ {
					want := fmt.Sprintf("caller %d call %d", g, i)
					got, err := ic.EchoString(ctx, want)
					if err == nil && got != want {
						err = fmt.Errorf("reply crossed: sent %q got %q", want, got)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}
