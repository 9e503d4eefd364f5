package rdma

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
)

// farSlice is an event slice no test lasts: with it a parked wait that
// resumes was woken by its fd (or a wake), never by its slice's end, so a
// lost wake-up hangs the test until its guard fails it.
const farSlice = time.Hour

// parkPair connects two event endpoints whose waits park on the sides
// asked (BlockWaits), their event slices far.
func parkPair(t *testing.T, cliPark, srvPark, twoDevices bool) (*RPCEndpoint, *RPCEndpoint) {
	t.Helper()
	cli, srv := newRPCPair(t, testEPConfig(PollEvent), testEPConfig(PollEvent), twoDevices)
	for _, s := range []struct {
		e    *RPCEndpoint
		park bool
	}{{cli, cliPark}, {srv, srvPark}} {
		s.e.setEventSlice(farSlice)
		s.e.BlockWaits(s.park)
	}
	return cli, srv
}

// parkServe serves h by proto on srv until the test ends (serveCalls).
func parkServe(t *testing.T, srv *RPCEndpoint, proto Protocol, h func([]byte) []byte) {
	t.Helper()
	t.Cleanup(serveCalls(t, srv, func(req []byte) ([]byte, Protocol) { return h(req), proto }))
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// untilParked waits (under the hang guard) for e's parked waits to pass n.
func untilParked(t *testing.T, e *RPCEndpoint, n uint64) {
	t.Helper()
	require.NoError(t, waitParked(e, n))
}

// waitParked is untilParked for a goroutine other than the test's.
func waitParked(e *RPCEndpoint, n uint64) error {
	deadline := time.Now().Add(testTimeout)
	for e.ParkedWaits() <= n {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("no wait parked past %d", n)
		}
		time.Sleep(50 * time.Microsecond)
	}
	return nil
}

// TestParkedWaits: a parked call is woken by its reply's completion, a
// parked server by the next request's, for messages sent eagerly and by
// rendezvous (which parks only before the message's first part); the
// parker's one fd goes once BlockWaits lets the waits go.
func TestParkedWaits(t *testing.T) {
	for _, tc := range []struct {
		name             string
		cliPark, srvPark bool
		proto            Protocol
		size             int
		twoDevices       bool
	}{
		{"call parks, eager 64 B", true, false, ProtoEager, 64, false},
		{"server parks, eager 64 B", false, true, ProtoEager, 64, false},
		{"both park, hybrid 64 KiB (write rendezvous)", true, true, ProtoHybrid, 64 << 10, false},
		{"both park, read rendezvous 64 KiB, two devices", true, true, ProtoReadRNDV, 64 << 10, true},
		{"both park, direct write imm 4 KiB", true, true, ProtoDirectWriteIMM, 4 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, srv := parkPair(t, false, false, tc.twoDevices)
			base := openFDs(t)
			cli.BlockWaits(tc.cliPark)
			srv.BlockWaits(tc.srvPark)
			// The handler answers once the call parked, so the reply's
			// completion is what wakes it.
			var parkedBefore atomic.Uint64
			var gate atomic.Bool
			gate.Store(tc.cliPark)
			herr := make(chan error, 1)
			parkServe(t, srv, tc.proto, func(req []byte) []byte {
				if gate.Load() {
					if err := waitParked(cli, parkedBefore.Load()); err != nil {
						select {
						case herr <- err:
						default:
						}
					}
				}
				return bytes.Repeat(req[:1], len(req))
			})
			const calls = 20
			for i := range calls {
				if tc.srvPark {
					// The next request goes once the server parked for it.
					untilParked(t, srv, uint64(i))
				}
				parkedBefore.Store(cli.ParkedWaits())
				req := bytes.Repeat([]byte{byte(i + 1)}, tc.size)
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				resp, err := cli.Call(ctx, tc.proto, req)
				cancel()
				require.NoError(t, err, "call %d", i)
				require.Equal(t, req, resp, "call %d", i)
			}
			select {
			case err := <-herr:
				t.Fatal(err)
			default:
			}
			parking := 0
			for _, p := range []bool{tc.cliPark, tc.srvPark} {
				if p {
					parking++
				}
			}
			require.Equal(t, base+parking, openFDs(t), "one fd a parking endpoint")
			if tc.cliPark {
				require.GreaterOrEqual(t, cli.ParkedWaits(), uint64(calls))
			} else {
				require.Zero(t, cli.ParkedWaits())
			}
			if !tc.srvPark {
				require.Zero(t, srv.ParkedWaits())
			}
			// Let go: the client's fd goes at once (no exchange runs),
			// the server's when its parked wait ends (an idle slice).
			gate.Store(false)
			cli.BlockWaits(false)
			srv.BlockWaits(false)
			deadline := time.Now().Add(testTimeout)
			for openFDs(t) != base {
				require.True(t, time.Now().Before(deadline), "parker fds left: %d over", openFDs(t)-base)
				time.Sleep(time.Millisecond)
			}
			// The waits block in C again and the calls go on.
			before := cli.ParkedWaits() + srv.ParkedWaits()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			resp, err := cli.Call(ctx, tc.proto, []byte("again"))
			require.NoError(t, err)
			require.Equal(t, []byte("aaaaa"), resp)
			require.Equal(t, before, cli.ParkedWaits()+srv.ParkedWaits())
		})
	}
}

// TestParkLostWakeup races completions against the arming of parked
// waits: both sides park, the server answers at once, so replies and
// requests land between a wait's poll, its arm and its park, where a
// completion the engine did not poll again after arming, or an fd
// readiness the poller cleared after the arm, would leave the wait parked
// for its (far) slice and the call to its hang guard.
func TestParkLostWakeup(t *testing.T) {
	for _, two := range []bool{false, true} {
		name := "one device"
		if two {
			name = "two devices"
		}
		t.Run(name, func(t *testing.T) {
			cli, srv := parkPair(t, true, true, two)
			parkServe(t, srv, ProtoEager, func(req []byte) []byte { return req })
			calls := 5000
			if testing.Short() {
				calls = 1000
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
			defer cancel()
			req := make([]byte, 64)
			for i := range calls {
				req[0] = byte(i)
				resp, err := cli.Call(ctx, ProtoEager, req)
				require.NoError(t, err, "call %d of %d", i, calls)
				require.Equal(t, req, resp)
			}
			require.NotZero(t, cli.ParkedWaits()+srv.ParkedWaits(), "no wait parked: the race was not run")
		})
	}
}

// TestParkedWaitWakes: a parked call ends at once when its context is
// cancelled or its endpoint aborted, and a parked server when its context
// ends, though the slice would keep them for an hour.
func TestParkedWaitWakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(cli *RPCEndpoint, cancel context.CancelFunc)
		want error
	}{
		{"cancel", func(_ *RPCEndpoint, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"abort", func(cli *RPCEndpoint, _ context.CancelFunc) { cli.Abort() }, ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, srv := parkPair(t, true, true, false)
			// The server's own loop: once the call is cut short the
			// reply it sends may fail, which is not this test's matter.
			sctx, scancel := context.WithCancel(context.Background())
			release := make(chan struct{})
			served := make(chan struct{})
			go func() {
				defer close(served)
				_ = srv.ServeCalls(sctx, nil, func(req []byte) ([]byte, Protocol) {
					<-release
					return req, ProtoEager
				})
			}()
			defer func() {
				close(release)
				scancel()
				<-served
			}()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := cli.Call(ctx, ProtoEager, []byte("held"))
				errc <- err
			}()
			untilParked(t, cli, 0)
			tc.end(cli, cancel)
			select {
			case err := <-errc:
				require.ErrorIs(t, err, tc.want)
			case <-time.After(testTimeout):
				t.Fatal("the parked call was not woken")
			}
		})
	}
	t.Run("server context", func(t *testing.T) {
		_, srv := parkPair(t, false, true, false)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			errc <- srv.ServeCalls(ctx, nil, func(req []byte) ([]byte, Protocol) { return req, ProtoEager })
		}()
		untilParked(t, srv, 0)
		cancel()
		select {
		case err := <-errc:
			require.NoError(t, err)
		case <-time.After(testTimeout):
			t.Fatal("the parked server was not woken")
		}
	})
}

// TestParkNoLeaks: streams of parked exchanges started and ended leave
// the process's goroutines and fds as they were.
func TestParkNoLeaks(t *testing.T) {
	cli, srv := parkPair(t, false, false, false)
	parkServe(t, srv, ProtoEager, func(req []byte) []byte { return req })
	before, err := testenv.Snapshot()
	require.NoError(t, err)
	for round := range 5 {
		cli.BlockWaits(true)
		srv.BlockWaits(true)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		for i := range 50 {
			_, err := cli.Call(ctx, ProtoEager, []byte{byte(round), byte(i)})
			require.NoError(t, err)
		}
		cancel()
		cli.BlockWaits(false)
		srv.BlockWaits(false)
		// No goroutine or fd the rounds started outlives them (parkers
		// end once their waits may no longer park).
		require.NoError(t, before.Settled(testTimeout), "round %d", round)
	}
	require.NotZero(t, cli.ParkedWaits()+srv.ParkedWaits())
}
