//go:build cgo && linux

package client_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
)

// On shm lanes too: an idempotent call failing with Unavailable is
// retried, and a hedged call's second copy answers on another lane while
// the first stalls; the stalled copy's context ends on the server.
func TestRetryAndHedgeOnLanes(t *testing.T) {
	m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo",
		Client: hints.Set{Idempotent: true, Retries: 2, Hedge: time.Millisecond}, Server: hints.Set{PayloadSize: 64}}}

	f := newFlaky(t, 1, 0)
	ts := laneServer(t, server.WithInterceptors(f.intercept))
	c := dial(t, ts.addr, quickBackoff)
	require.NoError(t, callEcho(tctx(t), c, m))
	assert.Equal(t, int64(2), f.calls.Load())
	assert.Equal(t, 2.0, callsOn(t, ts, fastpathtest.Transport()), "both attempts ran on the lane")

	f = newFlaky(t, 0, 1)
	ts = laneServer(t, server.WithInterceptors(f.intercept))
	var ev events
	c = dial(t, ts.addr, client.WithRetryObserver(ev.observe))
	require.NoError(t, callEcho(tctx(t), c, m))
	stalled := recv(t, f.arrived)
	assert.Equal(t, stalled, recv(t, f.cancelled), "the stalled copy's context ended on the server")
	assert.Equal(t, 1, ev.count(client.Hedged))
	assert.Equal(t, 2.0, callsOn(t, ts, fastpathtest.Transport()), "both copies ran on lanes")
}
