package lanes_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/fdcheck"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestForkExecWhileServingLanes: a server with per-function lanes and a
// FLOCK (shared) lane in use starts children through os/exec over and
// over, as a server running hooks or backups would: /bin/true and a child
// that lists and writes to every descriptor it was given. No child holds
// a descriptor of the engine, and the calls on both kinds of lane, checked
// byte for byte, go on before, during and after the children.
func TestForkExecWhileServingLanes(t *testing.T) {
	before, err := fdcheck.Targets()
	require.NoError(t, err)
	_, _, addr := start(t)
	_, sh, saddr := startShared(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(3*time.Minute))
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithRDMA(fastpathtest.Provider()))
	require.NoError(t, err)
	defer c.Close()
	sc, err := client.Dial(ctx, saddr, client.WithRDMA(fastpathtest.Provider()))
	require.NoError(t, err)
	defer sc.Close()
	mc, shc := mix.NewMixClient(c), mix.NewSharedClient(sc)
	call := func(i int) error {
		data := bytes.Repeat([]byte{byte(i), byte(i >> 8), 0x5a}, 1+i%3000)
		got, err := mc.Ping(ctx, data)
		if err == nil && !bytes.Equal(got, data) {
			err = fmt.Errorf("ping %d: %d bytes back, want %d, differing", i, len(got), len(data))
		}
		if err != nil {
			return err
		}
		key := []byte(fmt.Sprintf("k%06d", i))
		got, err = shc.Get(ctx, key)
		if err == nil && !bytes.Equal(got, bytes.Repeat(key, 4)) {
			err = fmt.Errorf("get %d: %q", i, got)
		}
		return err
	}
	require.NoError(t, call(0)) // lanes and the FLOCK handle are up
	engine, err := fdcheck.Opened(before)
	require.NoError(t, err)
	require.NotEmpty(t, engine)

	const children = 6
	calls, err := fdcheck.WhileChildren(ctx, children, engine, call)
	require.NoError(t, err)
	require.Positive(t, calls)
	require.NoError(t, call(calls+1))
	var viaFlock, viaLane uint64
	for _, s := range sc.LaneStats() {
		viaFlock += s.Requests["flock"]
	}
	for _, s := range c.LaneStats() {
		require.Equal(t, fastpathtest.Transport(), s.Transport, s.Function)
		for _, n := range s.Requests {
			viaLane += n
		}
	}
	require.Equal(t, uint64(calls+2), viaFlock, "every Get went through the FLOCK handle")
	require.Equal(t, sh.gets.Load(), int64(calls+2))
	require.Equal(t, uint64(calls+2), viaLane, "every Ping went on its lane")
	t.Logf("%d calls per lane kind verified while %d children ran; none of the %d descriptors opened to serve inherited: %v", calls+2, 2*children, len(engine), engine)
}
