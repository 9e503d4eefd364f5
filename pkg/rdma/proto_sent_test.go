package rdma

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSentByProtocol: each side counts a message it sent by the protocol
// it actually went by, for every protocol, both polling modes, and sizes
// on every side of the engine's size switches (hybrid's threshold, an
// eager slot, the pre-known buffer): the counters are what tells which
// protocol ran (the design-space test reads them through the runtime).
func TestSentByProtocol(t *testing.T) {
	cfg := testEPConfig(PollBusy)
	sizes := []int{0, 64, cfg.EagerThreshold, cfg.EagerThreshold + 1, cfg.SlotSize, cfg.SlotSize + 1,
		cfg.DirectSize, cfg.DirectSize + 1}
	for _, poll := range []Polling{PollBusy, PollEvent} {
		for _, p := range Protocols() {
			t.Run(fmt.Sprintf("%v/%v", p, poll), func(t *testing.T) {
				cfg := testEPConfig(poll)
				cli, srv := newRPCPair(t, cfg, cfg, false)
				for _, n := range sizes {
					wantCli := effective(p, n, cfg)
					wantSrv := wantCli
					if p == ProtoRFP {
						// A fetching client reads the reply the server left
						// for it, whatever way the request went.
						wantSrv = ProtoRFP
					}
					c0, s0 := cli.Stats(), srv.Stats()
					exchange(t, cli, srv, p, n)
					c1, s1 := cli.Stats(), srv.Stats()
					var wc, ws [NumProtocols]uint64
					wc[wantCli], ws[wantSrv] = 1, 1
					require.Equal(t, wc, sentDelta(c0, c1), "%d B: the client's request went by %v", n, wantCli)
					require.Equal(t, ws, sentDelta(s0, s1), "%d B: the server's reply went by %v", n, wantSrv)
				}
			})
		}
	}
}

// TestSentByProtocolHybrid pins the hybrid switch by name: eager up to the
// threshold, write_rndv past it, never counted as hybrid; and a fallback
// counts as the rendezvous it became.
func TestSentByProtocolHybrid(t *testing.T) {
	cfg := testEPConfig(PollBusy)
	cli, srv := newRPCPair(t, cfg, cfg, false)
	cases := []struct {
		p    Protocol
		n    int
		want Protocol
	}{
		{ProtoHybrid, cfg.EagerThreshold - 1, ProtoEager},
		{ProtoHybrid, cfg.EagerThreshold, ProtoEager},
		{ProtoHybrid, cfg.EagerThreshold + 1, ProtoWriteRNDV},
		{ProtoEager, cfg.SlotSize, ProtoEager},
		{ProtoEager, cfg.SlotSize + 1, ProtoWriteRNDV},
		{ProtoDirectWriteIMM, cfg.DirectSize, ProtoDirectWriteIMM},
		{ProtoDirectWriteIMM, cfg.DirectSize + 1, ProtoWriteRNDV},
	}
	for _, tc := range cases {
		c0, s0 := cli.Stats(), srv.Stats()
		exchange(t, cli, srv, tc.p, tc.n)
		c1, s1 := cli.Stats(), srv.Stats()
		require.Equal(t, uint64(1), c1.SentByProtocol[tc.want]-c0.SentByProtocol[tc.want], "%v %d B", tc.p, tc.n)
		require.Equal(t, uint64(1), s1.SentByProtocol[tc.want]-s0.SentByProtocol[tc.want], "%v %d B", tc.p, tc.n)
		require.Zero(t, c1.SentByProtocol[ProtoHybrid], "hybrid is never what a message went by")
		fallback := tc.want != tc.p && tc.p != ProtoHybrid
		require.Equal(t, fallback, c1.RNDVFallbacks > c0.RNDVFallbacks, "%v %d B: fallback", tc.p, tc.n)
	}
}

// exchange runs one n-byte call and its n-byte reply by p, the server's
// side on this goroutine (Recv, Reply), so neither side's Stats waits for
// a serving loop.
func exchange(t *testing.T, cli, srv *RPCEndpoint, p Protocol, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req := make([]byte, n)
	fill(req, byte(n))
	done := make(chan error, 1)
	go func() {
		resp, err := cli.Call(ctx, p, req)
		if err == nil && len(resp) != n {
			err = fmt.Errorf("%d B reply, want %d", len(resp), n)
		}
		done <- err
	}()
	got, err := srv.Recv(ctx)
	require.NoError(t, err)
	require.Len(t, got, n)
	require.NoError(t, srv.Reply(ctx, p, expectedResp(got, n)))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("call did not return")
	}
}

func sentDelta(a, b EndpointStats) [NumProtocols]uint64 {
	var d [NumProtocols]uint64
	for i := range d {
		d[i] = b.SentByProtocol[i] - a.SentByProtocol[i]
	}
	return d
}

// TestSentByProtocolLockFree: SentByProtocol reads the counts while an
// exchange runs (a server waiting in C for its next request), and keeps
// them once the endpoint is closed.
func TestSentByProtocolLockFree(t *testing.T) {
	cfg := testEPConfig(PollEvent)
	pd := newPD(t, openTest(t))
	cli, err := NewRPCEndpoint(pd, cfg) // closed here, not by a cleanup
	require.NoError(t, err)
	srv := newEndpoint(t, pd, cfg)
	connectEndpoints(t, cli, srv)
	exchange(t, cli, srv, ProtoEager, 64)
	ctx, cancel := context.WithCancel(context.Background())
	recvd := make(chan error, 1)
	go func() {
		_, err := srv.Recv(ctx)
		recvd <- err
	}()
	require.Eventually(t, srv.InExchange, testTimeout, time.Millisecond, "the server waits in C")
	require.Equal(t, uint64(1), srv.SentByProtocol()[ProtoEager])
	require.Equal(t, uint64(1), cli.SentByProtocol()[ProtoEager])
	cancel()
	require.Error(t, <-recvd)
	want := cli.SentByProtocol()
	require.NoError(t, cli.Close())
	require.Equal(t, want, cli.SentByProtocol())
	require.Equal(t, want, cli.Stats().SentByProtocol)
}

// TestCallsByProtocol: a client's calls are counted by the protocol each
// asked for (hybrid as hybrid, a fallback as what was asked); the server
// counts none.
func TestCallsByProtocol(t *testing.T) {
	cfg := testEPConfig(PollBusy)
	cli, srv := newRPCPair(t, cfg, cfg, false)
	cases := []struct {
		p Protocol
		n int
	}{
		{ProtoHybrid, cfg.EagerThreshold + 1},
		{ProtoEager, cfg.SlotSize + 1},
		{ProtoDirectWriteIMM, 64},
		{ProtoDirectWriteIMM, cfg.DirectSize + 1},
		{ProtoRFP, 64},
	}
	var want [NumProtocols]uint64
	for _, tc := range cases {
		exchange(t, cli, srv, tc.p, tc.n)
		want[tc.p]++
		require.Equal(t, want, cli.CallsByProtocol(), "%v %d B", tc.p, tc.n)
	}
	require.Equal(t, [NumProtocols]uint64{}, srv.CallsByProtocol(), "a server makes no calls")
}
