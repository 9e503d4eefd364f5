package rdma

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEndpointAbort: a call waiting in C for a server that never answers
// ends with ErrClosed once another goroutine aborts the endpoint, and the
// endpoint stays unusable.
func TestEndpointAbort(t *testing.T) {
	for _, poll := range []Polling{PollBusy, PollEvent} {
		t.Run(poll.String(), func(t *testing.T) {
			cfg := testEPConfig(poll)
			cli, _ := newRPCPair(t, cfg, cfg, false)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := cli.Call(ctx, ProtoEager, []byte("nobody answers"))
				errc <- err
			}()
			// Abort while the call waits in C, as the test means, rather
			// than after a sleep a slow host may outrun.
			require.Eventually(t, cli.InExchange, testTimeout, time.Millisecond, "the call waits in C")
			cli.Abort()
			select {
			case err := <-errc:
				require.ErrorIs(t, err, ErrClosed)
			case <-time.After(testTimeout):
				t.Fatal("aborted call did not return")
			}
			_, err := cli.Call(ctx, ProtoEager, []byte("again"))
			require.Error(t, err)
			require.NoError(t, ctx.Err(), "the failure must not be a timeout")
		})
	}
}

// TestEndpointSpin: adaptive polling (event mode with a spin phase) gives
// the same answers as both pure modes, and SetSpin can move it at any time.
func TestEndpointSpin(t *testing.T) {
	cfg := testEPConfig(PollEvent)
	cfg.SpinTime = 50 * time.Microsecond
	cli, srv := newRPCPair(t, cfg, cfg, false)
	rec := &recorder{}
	serve(t, srv, ProtoDirectWriteIMM, rec.handle)
	for i, spin := range []time.Duration{50 * time.Microsecond, 0, time.Millisecond, 0} {
		cli.SetSpin(spin)
		srv.SetSpin(spin)
		for j := 0; j < 50; j++ {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			req := []byte{byte(i), byte(j), 1, 2, 3}
			resp, err := cli.Call(ctx, ProtoDirectWriteIMM, req)
			cancel()
			require.NoError(t, err)
			require.Equal(t, expectedResp(req, len(req)), resp)
		}
	}
	require.Equal(t, 200, rec.count())
}

// TestServeCalls: the response protocol is chosen per request, and a
// closed stop channel ends the loop at the next idle moment with nil.
func TestServeCalls(t *testing.T) {
	cfg := testEPConfig(PollBusy)
	cli, srv := newRPCPair(t, cfg, cfg, false)
	protos := []Protocol{ProtoEager, ProtoWriteRNDV, ProtoDirectWriteIMM, ProtoChainedWriteSend}
	i := 0
	stop := serveCalls(t, srv, func(req []byte) ([]byte, Protocol) {
		p := protos[i%len(protos)]
		i++
		return append([]byte(p.String()+":"), req...), p
	})
	s0 := counters(t, srv)
	for j := 0; j < 8; j++ {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		resp, err := cli.Call(ctx, ProtoEager, []byte("x"))
		cancel()
		require.NoError(t, err)
		require.Equal(t, protos[j%len(protos)].String()+":x", string(resp))
	}
	s1 := counters(t, srv)
	d := postedDelta(s0, s1)
	require.Equal(t, uint64(2), d[OpRDMAWriteWithImm], "two Direct-WriteIMM responses")
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := cli.Call(ctx, ProtoEager, []byte("late"))
	require.True(t, errors.Is(err, context.DeadlineExceeded), "nobody serves after stop: %v", err)
}

// TestInExchange: an endpoint is in an exchange exactly while it waits in
// C: a client for its reply, a server for a request (between calls, not
// while its handler runs); neither before the first exchange nor once
// closed. The adaptive poller counts waiting lanes by it.
func TestInExchange(t *testing.T) {
	for _, poll := range []Polling{PollBusy, PollEvent} {
		t.Run(poll.String(), func(t *testing.T) {
			cfg := testEPConfig(poll)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			require.False(t, cli.InExchange(), "no call yet")
			require.False(t, srv.InExchange(), "not serving yet")
			inHandler, release := make(chan struct{}), make(chan struct{})
			stop := serveCalls(t, srv, func(req []byte) ([]byte, Protocol) {
				inHandler <- struct{}{}
				<-release
				return req, ProtoEager
			})
			callc := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				_, err := cli.Call(ctx, ProtoEager, []byte("x"))
				callc <- err
			}()
			select {
			case <-inHandler:
			case <-time.After(testTimeout):
				t.Fatal("the request did not reach the handler")
			}
			require.False(t, srv.InExchange(), "the handler runs in Go")
			require.True(t, cli.InExchange(), "the caller waits in C for its reply")
			close(release)
			select {
			case err := <-callc:
				require.NoError(t, err)
			case <-time.After(testTimeout):
				t.Fatal("the call did not return")
			}
			require.False(t, cli.InExchange(), "the call returned")
			require.Eventually(t, srv.InExchange, testTimeout, time.Millisecond, "the server waits in C for the next request")
			stop()
			require.False(t, srv.InExchange(), "stopped serving")
			e, err := NewRPCEndpoint(newPD(t, openTest(t)), cfg)
			require.NoError(t, err)
			require.NoError(t, e.Close())
			require.False(t, e.InExchange(), "closed (its C memory is gone: not read)")
		})
	}
}

// TestEndpointArrived: a server's Arrived is when the engine took the
// request in, on MonotonicNow's clock: before the handler ran, and later
// for every later request; 0 before the first one. A wait that polled
// stamps its request with its last clock read while nothing had come
// (a few polls before it saw the request, which may be before the client
// sent it): never before the wait began, i.e. after the last handler
// ran. An RFP request, and one a wait saw after sleeping on its channel
// (event polling without a spin), is stamped when it is seen: after the
// client started the call. Without TimeArrivals only RFP requests are
// stamped (TestEndpointArrivedUntimed).
func TestEndpointArrived(t *testing.T) {
	spin := testEPConfig(PollEvent)
	spin.SpinTime = time.Millisecond
	cases := []struct {
		name  string
		cfg   EndpointConfig
		proto Protocol
		// polled: the server's waits poll (busy, or a spin) and a
		// request that is no RFP one carries the wait's last read.
		polled bool
	}{
		{"busy/eager", testEPConfig(PollBusy), ProtoEager, true},
		{"busy/direct_write_imm", testEPConfig(PollBusy), ProtoDirectWriteIMM, true},
		{"busy/rfp", testEPConfig(PollBusy), ProtoRFP, false},
		{"event/direct_write_imm", testEPConfig(PollEvent), ProtoDirectWriteIMM, false},
		{"event/rfp", testEPConfig(PollEvent), ProtoRFP, false},
		{"spin/direct_write_imm", spin, ProtoDirectWriteIMM, true},
		{"spin/rfp", spin, ProtoRFP, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cli, srv := newRPCPair(t, tc.cfg, tc.cfg, false)
			require.Zero(t, srv.Arrived(), "no request yet")
			type seen struct{ arrived, entered int64 }
			got := make(chan seen, 1)
			waited := MonotonicNow() // the server's first wait begins after this
			stop := serveCalls(t, srv, func(req []byte) ([]byte, Protocol) {
				got <- seen{srv.Arrived(), MonotonicNow()}
				return req, tc.proto
			}, TimeArrivals())
			var last int64
			for i := 0; i < 20; i++ {
				before := MonotonicNow()
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				resp, err := cli.Call(ctx, tc.proto, []byte{byte(i), 1, 2, 3})
				cancel()
				require.NoError(t, err)
				require.Equal(t, []byte{byte(i), 1, 2, 3}, resp)
				var s seen
				select {
				case s = <-got:
				case <-time.After(testTimeout):
					t.Fatal("handler did not report")
				}
				if tc.polled {
					require.GreaterOrEqual(t, s.arrived, waited, "call %d stamped before the server waited for it", i)
				} else {
					require.GreaterOrEqual(t, s.arrived, before, "call %d arrived before it was sent", i)
				}
				require.LessOrEqual(t, s.arrived, s.entered, "call %d arrived after its handler ran", i)
				require.Greater(t, s.arrived, last, "call %d", i)
				last = s.arrived
				waited = s.entered // the next wait begins after this handler
			}
			stop()
		})
	}
}

// TestEndpointArrivedUntimed: ServeCalls without TimeArrivals reads no
// clock for a request that does not need one: Arrived stays 0 for
// Direct-WriteIMM and eager requests; an RFP request is still stamped
// (its reply carries the server's time).
func TestEndpointArrivedUntimed(t *testing.T) {
	cases := []struct {
		name    string
		proto   Protocol
		stamped bool
	}{
		{"direct_write_imm", ProtoDirectWriteIMM, false},
		{"eager", ProtoEager, false},
		{"rfp", ProtoRFP, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testEPConfig(PollEvent)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			got := make(chan int64, 1)
			stop := serveCalls(t, srv, func(req []byte) ([]byte, Protocol) {
				got <- srv.Arrived()
				return req, tc.proto
			})
			before := MonotonicNow()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			resp, err := cli.Call(ctx, tc.proto, []byte{1, 2, 3})
			cancel()
			require.NoError(t, err)
			require.Equal(t, []byte{1, 2, 3}, resp)
			var arrived int64
			select {
			case arrived = <-got:
			case <-time.After(testTimeout):
				t.Fatal("handler did not report")
			}
			if tc.stamped {
				require.GreaterOrEqual(t, arrived, before)
			} else {
				require.Zero(t, arrived, "no clock read for the request")
			}
			stop()
		})
	}
}

// TestEndpointLocalBuffers: requests and replies in a caller's local
// arrays, from a goroutine whose stack keeps growing (each level of the
// recursion below is a deeper frame, so stacks are copied between and
// around calls). An exchange hands C its message as an address; the
// endpoint keeps such buffers on the heap, where nothing moves, so every
// reply comes back intact.
func TestEndpointLocalBuffers(t *testing.T) {
	for _, proto := range []Protocol{ProtoEager, ProtoDirectWriteIMM, ProtoRFP} {
		t.Run(proto.String(), func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			stop := serveCalls(t, srv, func(req []byte) ([]byte, Protocol) {
				var out [96]byte
				n := copy(out[:], req)
				out[0] ^= 0xff
				return out[:n], proto
			})
			var deep func(level int) error
			deep = func(level int) error {
				var pad [512]byte // a frame large enough to grow the stack
				var req [80]byte
				for i := range req {
					req[i] = byte(level + i)
				}
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				resp, err := cli.Call(ctx, proto, req[:])
				cancel()
				if err != nil {
					return err
				}
				want := req
				want[0] ^= 0xff
				if string(resp) != string(want[:]) {
					return fmt.Errorf("level %d: reply %x, want %x", level, resp, want)
				}
				if level == 200 {
					return nil
				}
				pad[level%len(pad)] = byte(level)
				return errors.Join(deep(level+1), keepPad(pad[:]))
			}
			done := make(chan error, 1)
			go func() { done <- deep(0) }()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(testTimeout):
				t.Fatal("calls did not finish")
			}
			stop()
		})
	}
}

// keepPad keeps a frame's padding alive past the recursive call.
func keepPad(pad []byte) error {
	if len(pad) == 0 {
		return errors.New("no padding")
	}
	return nil
}

// serveCalls runs srv.ServeCalls(h) until the returned stop is called,
// which waits (under testTimeout) for the loop to end without an error.
func serveCalls(t *testing.T, srv *RPCEndpoint, h func(req []byte) ([]byte, Protocol), opts ...ServeOption) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeCalls(context.Background(), done, h, opts...) }()
	return func() {
		t.Helper()
		close(done)
		select {
		case err := <-errc:
			require.NoError(t, err)
		case <-time.After(testTimeout):
			t.Fatal("ServeCalls did not stop")
		}
	}
}
