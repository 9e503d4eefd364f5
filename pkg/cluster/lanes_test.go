package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
)

// callsOn reads a server's call counter for function fn on a transport.
func callsOn(t *testing.T, ts *testServer, fn, transport string) float64 {
	t.Helper()
	ts.mu.Lock()
	s := ts.srv
	ts.mu.Unlock()
	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "hatrpc_server_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			lbl := map[string]string{}
			for _, l := range m.GetLabel() {
				lbl[l.GetName()] = l.GetValue()
			}
			if lbl["function"] == fn && lbl["transport"] == transport {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestLanesPerServer: each server's Conn brings its own fast-path lanes,
// so calls spread over servers still run on lanes (shm, or ibv in the
// Soft-RoCE guest), and a lane server's
// death is a failure like any other.
func TestLanesPerServer(t *testing.T) {
	ha, hb := newStoreHandler(), newStoreHandler()
	a := startServer(t, ha, server.WithRDMA(fastpathtest.Provider()))
	b := startServer(t, hb, server.WithRDMA(fastpathtest.Provider()))
	cl := dialCluster(t, []string{a.addr, b.addr}, fastOptions()...)
	kv := store.NewStoreClient(cl)
	for i := range 20 {
		_, err := kv.Get(tctx(t, 5*time.Second), string(rune('a'+i)))
		require.NoError(t, err)
	}
	for _, ts := range []*testServer{a, b} {
		assert.Equal(t, 10.0, callsOn(t, ts, "get", fastpathtest.Transport()), "every call ran on a lane of its server")
		assert.Equal(t, 0.0, callsOn(t, ts, "get", "tcp"))
	}
	a.kill()
	for i := range 20 {
		_, err := kv.Get(tctx(t, 5*time.Second), string(rune('a'+i)))
		require.NoError(t, err, "call %d", i)
	}
	assert.Equal(t, 30.0, callsOn(t, b, "get", fastpathtest.Transport()))
	assert.Equal(t, int64(30), hb.gets.Load())
}
