package rdma

import (
	"context"
	"errors"
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
			time.Sleep(20 * time.Millisecond)
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
	stop := make(chan struct{})
	errc := make(chan error, 1)
	protos := []Protocol{ProtoEager, ProtoWriteRNDV, ProtoDirectWriteIMM, ProtoChainedWriteSend}
	i := 0
	go func() {
		errc <- srv.ServeCalls(context.Background(), stop, func(req []byte) ([]byte, Protocol) {
			p := protos[i%len(protos)]
			i++
			return append([]byte(p.String()+":"), req...), p
		})
	}()
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
	close(stop)
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(testTimeout):
		t.Fatal("ServeCalls did not stop")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := cli.Call(ctx, ProtoEager, []byte("late"))
	require.True(t, errors.Is(err, context.DeadlineExceeded), "nobody serves after stop: %v", err)
}
