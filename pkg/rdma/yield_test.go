package rdma

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEndpointYieldsToScheduler: an endpoint used exchange after exchange
// yields to the Go scheduler once every yieldAfter of its clock (looked at
// every yieldCheck exchanges), on the client and on a serving loop alike,
// so sysmon never retakes a poller's P in the middle of a C call; a clock
// that does not move makes it never yield, and neither does an event-mode
// endpoint without a spin phase (it blocks in the kernel, not in a poll
// loop) until SetSpin gives it one.
func TestEndpointYieldsToScheduler(t *testing.T) {
	tests := []struct {
		name       string
		step       time.Duration // the fake clock's advance per reading
		calls      int
		event      bool          // event-mode endpoints (busy otherwise)
		spin       time.Duration // with event: SetSpin before the calls (0: none)
		wantYields int
	}{
		{name: "clock stands still", step: 0, calls: 400, wantYields: 0},
		{name: "one check per yieldAfter", step: yieldAfter, calls: 400, wantYields: 400/yieldCheck - 1},
		{name: "half a yieldAfter per check", step: yieldAfter / 2, calls: 400, wantYields: 400/yieldCheck/2 - 1},
		{name: "event mode, no spin", step: yieldAfter, calls: 400, event: true, wantYields: 0},
		{name: "event mode with a spin", step: yieldAfter, calls: 400, event: true, spin: time.Millisecond,
			wantYields: 400/yieldCheck - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			if tc.event {
				cfg = testEPConfig(PollEvent)
			}
			cli, srv := newRPCPair(t, cfg, cfg, false)
			if tc.spin > 0 {
				cli.SetSpin(tc.spin)
				srv.SetSpin(tc.spin)
			}
			fake := func(e *RPCEndpoint) {
				var at time.Duration
				e.now = func() time.Duration { at += tc.step; return at }
			}
			fake(cli)
			fake(srv)
			serve(t, srv, ProtoEager, func(req []byte) []byte { return req })
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			for i := 0; i < tc.calls; i++ {
				got, err := cli.Call(ctx, ProtoEager, []byte("yield"))
				require.NoError(t, err)
				require.Equal(t, "yield", string(got))
			}
			cli.mu.Lock()
			yields := cli.yields
			cli.mu.Unlock()
			require.Equal(t, tc.wantYields, yields)
			// The server's loop ran (about) as many exchanges: the last
			// reply-and-receive may still be in C, so one check fewer.
			srv.mu.Lock()
			syields := srv.yields
			srv.mu.Unlock()
			require.InDelta(t, tc.wantYields, syields, 1)
		})
	}
}
