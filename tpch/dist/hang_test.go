package dist

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/tpch/duck"
	eb "github.com/hatrpc/hatrpc/tpch/gen/exchangebase"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// hangingWorker answers like the worker it wraps until hang is set;
// then every call is accepted and never answered (until released: the
// test's end).
type hangingWorker struct {
	*Worker
	hang    atomic.Bool
	release chan struct{}
}

func (h *hangingWorker) wait(ctx context.Context) error {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return errors.New("released")
}

func (h *hangingWorker) OpenFragment(ctx context.Context, req *eb.OpenReq) (*eb.OpenResp, error) {
	if h.hang.Load() {
		return nil, h.wait(ctx)
	}
	return h.Worker.OpenFragment(ctx, req)
}

func (h *hangingWorker) Cancel(ctx context.Context, tag string) error {
	if h.hang.Load() {
		return h.wait(ctx)
	}
	return h.Worker.Cancel(ctx, tag)
}

// silentListener accepts connections and reads them, never writing a
// byte: a worker hung below the RPC layer (HatRPC's handshake gets no
// answer either).
type silentListener struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newSilentListener(t *testing.T) *silentListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &silentListener{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() { defer s.wg.Done(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	return s
}

func (s *silentListener) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func scalar(t *testing.T, cur hs2.Cursor) string {
	t.Helper()
	defer func() { require.NoError(t, cur.Close()) }()
	require.True(t, cur.Next(), "one row: %v", cur.Err())
	var v any
	require.NoError(t, cur.Scan(&v))
	require.False(t, cur.Next())
	return fmt.Sprint(v)
}

// TestHungWorker: a worker that accepts the exchange's calls and never
// answers fails its query with the call timeout, naming it; the
// coordinator goes on serving, and uses the worker again once it answers.
func TestHungWorker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full, err := duck.Open(ctx, 0.01)
	require.NoError(t, err)
	defer func() { assert.NoError(t, full.Close()) }()
	texts, err := duck.Queries(ctx, full)
	require.NoError(t, err)
	var wantV any
	require.NoError(t, full.QueryRowContext(ctx, texts[6]).Scan(&wantV))
	want := fmt.Sprint(wantV)
	coordDB, err := duck.Open(ctx, 0.01)
	require.NoError(t, err)
	defer func() { assert.NoError(t, coordDB.Close()) }()
	require.NoError(t, PrepareCoordinator(ctx, coordDB))
	var ws [2]*Worker
	for i := range ws {
		ws[i], err = OpenWorker(ctx, 0.01, i, 2)
		require.NoError(t, err)
		defer func() { assert.NoError(t, ws[i].Close()) }()
	}

	// The cases run at once (each waits out the timeout twice: the call,
	// then the Cancel to the hung worker); the group ends before the
	// workers close.
	t.Run("group", func(t *testing.T) { hungWorkerCases(t, ctx, coordDB, ws, texts, want) })
}

func hungWorkerCases(t *testing.T, ctx context.Context, coordDB *sql.DB, ws [2]*Worker, texts []string, want string) {
	const timeout = 2 * time.Second // far above a live SF 0.01 call, short for the test
	for _, tc := range []struct {
		cfg    Config
		silent bool   // worker 1 is a listener that never answers, not a hung handler
		call   string // the call that times out
	}{
		{Vanilla, false, "OpenFragment"},
		{Function, false, "OpenFragment"},
		{Vanilla, true, "OpenFragment"}, // Apache's dial is TCP's alone
		{Function, true, "the dial"},    // HatRPC's handshake gets no answer
	} {
		name := tc.cfg.String()
		if tc.silent {
			name += "/silent"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ln0, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer serve(ws[0], ln0, tc.cfg, "off")(context.Background()) //nolint:errcheck
			hw := &hangingWorker{Worker: ws[1], release: make(chan struct{})}
			hw.hang.Store(true)
			var addr1 string
			if tc.silent {
				sl := newSilentListener(t)
				defer sl.close()
				addr1 = sl.ln.Addr().String()
			} else {
				ln1, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				stop := serve(hw, ln1, tc.cfg, "off")
				defer func() { close(hw.release); _ = stop(context.Background()) }()
				addr1 = ln1.Addr().String()
			}

			coord, err := NewCoordinator(ctx, coordDB, []string{ln0.Addr().String(), addr1}, tc.cfg, "off", WithCallTimeout(timeout))
			require.NoError(t, err)
			defer func() { assert.NoError(t, coord.Close()) }()

			_, err = coord.Query(ctx, texts[6])
			var we *WorkerError
			require.ErrorAs(t, err, &we)
			assert.Equal(t, 1, we.Index)
			assert.EqualError(t, err, fmt.Sprintf("dist: worker 1 (%s): no answer to %s within 2s", addr1, tc.call))
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NoError(t, ctx.Err(), "the query failed on the call timeout, not the test's")

			// The coordinator goes on: a local query runs, and so does a
			// second attempt at the hung worker's (it fails the same way).
			cur, err := coord.Query(ctx, texts[2])
			require.NoError(t, err)
			require.NoError(t, cur.Close())
			if tc.silent {
				_, err = coord.Query(ctx, texts[6])
				require.ErrorAs(t, err, &we)
				assert.Equal(t, 1, we.Index)
				return
			}
			hw.hang.Store(false)
			cur, err = coord.Query(ctx, texts[6])
			require.NoError(t, err)
			assert.Equal(t, want, scalar(t, cur), "the worker answers again")
		})
	}
}
