package hs2

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

// fakeClock is the handler's clock in tests: it moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// TestIdleSessionExpiry: a session no call named for the timeout is
// closed with its operations (their cursors and the engine's connections
// released); calls naming it or its operations say it expired; a session
// in use, or waiting on a running query, stays.
func TestIdleSessionExpiry(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := newFixture(t, WithIdleSessionTimeout(time.Minute), withClock(clock.Now))
	idle := f.sh
	ex := f.exec(t, "SELECT * FROM range(100000)", false)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, ex.Status.StatusCode)
	fr := f.fetch(t, ex.OperationHandle, 10)
	require.True(t, fr.GetHasMoreRows())
	require.Equal(t, 1, f.h.db.Stats().InUse, "the open cursor holds a connection")

	busy := f.open(t)
	f.sh = busy
	slow := f.exec(t, "SELECT count(*) FROM range(1000000000000) t(x) WHERE x % 7 = 3", true)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, slow.Status.StatusCode)
	// The async query takes its connection on a goroutine of its own,
	// maybe after ExecuteStatement answered.
	require.Eventually(t, func() bool { return f.h.db.Stats().InUse == 2 }, testenv.HangGuard(time.Minute), 5*time.Millisecond,
		"the running query holds a connection")
	used := f.open(t)

	clock.advance(59 * time.Second)
	assert.Zero(t, f.h.expireIdle(), "not idle for the timeout yet")
	info, err := f.h.GetInfo(f.ctx, &tcli.TGetInfoReq{SessionHandle: used, InfoType: tcli.TGetInfoType_CLI_SERVER_NAME})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, info.Status.StatusCode)
	clock.advance(2 * time.Second)
	assert.Equal(t, 1, f.h.expireIdle(), "only the idle session: one was used, one waits on its query")

	f.h.mu.Lock()
	assert.Len(t, f.h.sessions, 2)
	assert.Len(t, f.h.ops, 1, "the idle session's operation is gone")
	f.h.mu.Unlock()
	assert.Equal(t, 1, f.h.db.Stats().InUse, "the expired cursor's connection is back (the running query holds one)")

	f.sh = idle
	r := f.exec(t, "SELECT 1", false)
	assert.Equal(t, tcli.TStatusCode_INVALID_HANDLE_STATUS, r.Status.StatusCode)
	assert.Equal(t, "hs2: invalid handle: session expired (idle for more than 1m0s)", r.Status.GetErrorMessage())
	fr = f.fetch(t, ex.OperationHandle, 10)
	assert.Equal(t, tcli.TStatusCode_INVALID_HANDLE_STATUS, fr.Status.StatusCode)
	assert.Equal(t, "hs2: invalid handle: the operation's session expired (idle for more than 1m0s)", fr.Status.GetErrorMessage())
	cs, err := f.h.CloseSession(f.ctx, &tcli.TCloseSessionReq{SessionHandle: idle})
	require.NoError(t, err)
	assert.Equal(t, tcli.TStatusCode_INVALID_HANDLE_STATUS, cs.Status.StatusCode)

	// The running query's session expires once the query is over and the
	// session idle again.
	cr, err := f.h.CancelOperation(f.ctx, &tcli.TCancelOperationReq{OperationHandle: slow.OperationHandle})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, cr.Status.StatusCode)
	assert.Zero(t, f.h.expireIdle(), "the cancel was a use")
	clock.advance(time.Minute)
	assert.Equal(t, 2, f.h.expireIdle())
	f.h.mu.Lock()
	assert.Empty(t, f.h.sessions)
	assert.Empty(t, f.h.ops)
	f.h.mu.Unlock()
	assert.Zero(t, f.h.db.Stats().InUse)
	f.sh = busy
	assert.Equal(t, "hs2: invalid handle: session expired (idle for more than 1m0s)", f.exec(t, "SELECT 1", false).Status.GetErrorMessage())
}

// TestIdleSessionExpiryOff: without the option nothing expires.
func TestIdleSessionExpiryOff(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := newFixture(t, withClock(clock.Now))
	clock.advance(1000 * time.Hour)
	assert.Zero(t, f.h.expireIdle())
	assert.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, f.exec(t, "SELECT 1", false).Status.StatusCode)
}
