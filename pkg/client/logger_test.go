//go:build cgo && linux

package client_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testutil"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestWithLogger: what a Conn logs (here the fast path falling back to TCP
// when the server's lane budget refuses it) goes to WithLogger's logger,
// and nothing to slog.Default().
func TestWithLogger(t *testing.T) {
	var mine, dflt testutil.LogBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&dflt, nil)))
	defer slog.SetDefault(old)

	ts := laneServer(t, server.WithLaneLimits(server.LaneLimits{Bytes: 1}))
	c := dial(t, ts.addr, client.WithLogger(slog.New(slog.NewTextHandler(&mine, nil))),
		client.WithFastPathRetry(time.Hour, time.Hour))
	m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo"}}
	var res wiretest.EchoResult
	require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "x"}, &res))
	require.ErrorIs(t, c.FastPathErr(), client.ErrFastPathSetup)
	assert.Contains(t, mine.String(), `level=WARN msg="hatrpc: fast path unavailable; calls go over TCP" server=`+ts.addr)
	assert.Empty(t, dflt.String(), "nothing logged to slog.Default()")
}
