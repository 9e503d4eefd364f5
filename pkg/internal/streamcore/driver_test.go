package streamcore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// testDriver grants credit from Drive, as a lane's exchange run by the
// sender files the client's credit, up to grants times.
type testDriver struct {
	c        *Conn
	grants   int
	drives   atomic.Int32
	sizes    []int64
	finished atomic.Int32
}

func (d *testDriver) Drive(_ context.Context, size int64) bool {
	d.drives.Add(1)
	d.sizes = append(d.sizes, size)
	if d.grants == 0 {
		return false
	}
	d.grants--
	_, err := d.c.Window(1, 1, uint32(size))
	return err == nil
}

func (d *testDriver) Finished() { d.finished.Add(1) }

// A sender out of credit runs its Conn's Driver before it waits, and
// takes the credit the driver's exchange brought without waiting; a
// driver with nothing to run leaves it to wait as before. Finish tells
// the driver once.
func TestSendDrives(t *testing.T) {
	tests := []struct {
		name   string
		grants int
		ctx    func() context.Context
		err    error
		drives int32
	}{
		{"credit from the exchange", 3, context.Background, nil, 3},
		{"nothing to drive: waits", 0, canceled, context.Canceled, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &testDriver{grants: tt.grants}
			c, _, _ := newTestConn(t, wire.StreamWindows{Messages: 1, Bytes: 1 << 20, Conn: 1 << 30}, WithDriver(d))
			d.c = c
			s, err := c.Open(1, nil)
			require.NoError(t, err)
			require.NoError(t, s.Send(context.Background(), 100, func() error { return nil }))
			for range tt.grants {
				require.NoError(t, s.Send(tt.ctx(), 100, func() error { return nil }))
			}
			if tt.grants == 0 {
				require.ErrorIs(t, s.Send(tt.ctx(), 100, func() error { return nil }), tt.err)
			}
			require.Equal(t, tt.drives, d.drives.Load())
			require.Equal(t, int64(100), d.sizes[0])
			require.Zero(t, d.finished.Load())
			require.True(t, s.Finish(context.Canceled))
			require.False(t, s.Finish(context.Canceled))
			require.Equal(t, int32(1), d.finished.Load())
		})
	}
}

// A sender waiting for credit after its driver had nothing to run drives
// again once Redrive says the driver has an exchange for it.
func TestRedrive(t *testing.T) {
	d := &lockedDriver{}
	c, _, _ := newTestConn(t, wire.StreamWindows{Messages: 1, Bytes: 1 << 20, Conn: 1 << 30}, WithDriver(d))
	d.c = c
	s, err := c.Open(1, nil)
	require.NoError(t, err)
	require.NoError(t, s.Send(context.Background(), 100, func() error { return nil }))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	sent := make(chan error, 1)
	go func() { sent <- s.Send(ctx, 100, func() error { return nil }) }()
	require.Eventually(t, func() bool { return d.drives.Load() == 1 }, testenv.HangGuard(10*time.Second), time.Millisecond)
	d.ready.Store(true)
	c.Redrive()
	require.NoError(t, <-sent)
	require.Equal(t, int32(2), d.drives.Load())
}

// lockedDriver grants one message of credit from Drive once ready.
type lockedDriver struct {
	c      *Conn
	ready  atomic.Bool
	drives atomic.Int32
}

func (d *lockedDriver) Drive(_ context.Context, size int64) bool {
	d.drives.Add(1)
	if !d.ready.Load() {
		return false
	}
	_, err := d.c.Window(1, 1, uint32(size))
	return err == nil
}

func (d *lockedDriver) Finished() {}
