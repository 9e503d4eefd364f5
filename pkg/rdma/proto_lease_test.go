package rdma

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sameLease: both nil, or the same bytes of the same buffer.
func sameLease(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// The leases RequestBuffer and ReplyBuffer hand out without a crossing are
// the ones C gives for the same size at that moment, through every change
// of the buffers: growth (a larger lease, a larger message staged), the
// response buffer of a fetching client's request, no request pending.
func TestLeasesMatchCrossing(t *testing.T) {
	sizes := []int{0, 1, 100, 4 << 10, 64 << 10, 64<<10 + 1, 300 << 10, 1 << 20}
	for _, proto := range []Protocol{ProtoEager, ProtoRFP, ProtoReadRNDV, ProtoWriteRNDV, ProtoDirectWriteIMM} {
		t.Run(proto.String(), func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			var mu sync.Mutex
			var bad []string
			check := func(side string, n int, fast, slow []byte) {
				if !sameLease(fast, slow) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s %d: %p/%d, C %p/%d", side, n,
						unsafe.SliceData(fast), len(fast), unsafe.SliceData(slow), len(slow)))
					mu.Unlock()
				}
			}
			serve(t, srv, proto, func(req []byte) []byte {
				for _, n := range sizes {
					check("reply", n, srv.ReplyBuffer(n), srv.replyBufferCrossing(n))
				}
				out := srv.ReplyBuffer(len(req))
				for i := range req {
					out[i] = ^req[i]
				}
				return out
			})
			for _, n := range []int{1, 100, 20 << 10, 500 << 10, 100} {
				for _, m := range sizes {
					check("request", m, cli.RequestBuffer(m), cli.requestBufferCrossing(m))
				}
				callInverted(t, cli, proto, n)
			}
			mu.Lock()
			defer mu.Unlock()
			require.Empty(t, bad)
		})
	}
}

// A server's staging buffer is the Read-RNDV source of its reply until the
// client releases it: no lease of it meanwhile, crossing or not; the next
// request brings the release. Without a request in hand there is no reply
// lease, and a closed endpoint lends nothing.
func TestLeasesWhileLentAndClosed(t *testing.T) {
	cfg := testEPConfig(PollBusy)
	cli, srv := newRPCPair(t, cfg, cfg, false)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type result struct {
		resp []byte
		err  error
	}
	calls := make(chan result, 2)
	call := func() {
		resp, err := cli.Call(ctx, ProtoReadRNDV, make([]byte, 10))
		calls <- result{append([]byte(nil), resp...), err}
	}
	go call()
	_, err := srv.Recv(ctx)
	require.NoError(t, err)
	require.NoError(t, srv.Reply(ctx, ProtoReadRNDV, make([]byte, 20)))
	require.Nil(t, srv.RequestBuffer(10))
	require.Nil(t, srv.requestBufferCrossing(10))
	require.Nil(t, srv.ReplyBuffer(10), "no request pending")
	r := <-calls
	require.NoError(t, r.err)
	require.Len(t, r.resp, 20)
	go call()
	_, err = srv.Recv(ctx)
	require.NoError(t, err)
	require.NotNil(t, srv.RequestBuffer(10), "released with the next request")
	require.True(t, sameLease(srv.RequestBuffer(10), srv.requestBufferCrossing(10)))
	require.NoError(t, srv.Reply(ctx, ProtoEager, make([]byte, 20)))
	r = <-calls
	require.NoError(t, r.err)

	e, err := NewRPCEndpoint(newPD(t, openTest(t)), cfg)
	require.NoError(t, err)
	require.NotNil(t, e.RequestBuffer(10))
	require.NoError(t, e.Close())
	require.Nil(t, e.RequestBuffer(10))
	require.Nil(t, e.ReplyBuffer(10))
}

// Two leases, each larger than the staging buffer, between two exchanges
// while an unsignaled send is outstanding: the first keeps the old buffer
// until a completion retires that send, and the second must not wait for
// that completion, which no post is coming to bring (a server's handler
// hung there for good; a client's lease failed once its last call's
// context ended).
func TestStagingGrowsTwiceBetweenExchanges(t *testing.T) {
	cfg := testEPConfig(PollBusy)
	cli, srv := newRPCPair(t, cfg, cfg, false)
	twice := func(lease func(int) []byte) []byte {
		_ = lease(300 << 10)
		return lease(1 << 20)
	}
	serve(t, srv, ProtoEager, func(req []byte) []byte {
		if len(req) != 1 {
			return req
		}
		out := twice(srv.ReplyBuffer) // after an unsignaled reply (SignalInterval 8)
		fill(out, 5)
		return out
	})
	for _, side := range []string{"client", "server"} {
		_, err := callT(t, cli, ProtoEager, make([]byte, 10)) // one unsignaled SEND each way
		require.NoError(t, err, side)
		want := make([]byte, 1<<20)
		fill(want, 5)
		req := []byte{1}
		if side == "client" {
			req = twice(cli.RequestBuffer)
			require.Len(t, req, 1<<20)
			copy(req, want)
		}
		got, err := callT(t, cli, ProtoEager, req) // too large for a slot: Write-RNDV
		require.NoError(t, err, side)
		require.Equal(t, want, got, side)
	}
}

// BenchmarkRequestBuffer is a lease from the view against one from C: the
// crossing a lease cost on every message of a caller building it in place.
//
//	go test ./pkg/rdma -run '^$' -bench RequestBuffer
func BenchmarkRequestBuffer(b *testing.B) {
	cfg := testEPConfig(PollBusy)
	cli, _ := newRPCPair(b, cfg, cfg, false)
	for _, bc := range []struct {
		name  string
		lease func(int) []byte
	}{{"view", cli.RequestBuffer}, {"crossing", cli.requestBufferCrossing}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_ = bc.lease(64)
			}
		})
	}
}

// NextReplyBuffer lends the staging buffer the pending reply does not go
// from: another goroutine fills the reply after it there while the
// exchange runs, and each reply arrives whole with its own bytes, by
// every protocol, in both polling modes. From the second reply on each
// goes from where it was filled (no copy: the engine swapped the
// buffers), and the lease for the one after it is the other buffer.
func TestNextReplyBuffer(t *testing.T) {
	const calls = 8
	forNextBufferCases(t, func(t *testing.T, poll Polling, proto Protocol, n int) {
		cfg := testEPConfig(poll)
		cli, srv := newRPCPair(t, cfg, cfg, false)
		// The last fill ends before the endpoints close (their
		// memory is unmapped): cleanups run last first.
		var fills sync.WaitGroup
		t.Cleanup(fills.Wait)
		var (
			next   []byte
			filled chan struct{}
			k      int
			sent   [][]byte
		)
		serve(t, srv, proto, func([]byte) []byte {
			out := next
			if filled != nil {
				<-filled // filled while the last reply went out
			} else {
				out = srv.ReplyBuffer(n)
				fill(out, byte(k))
			}
			sent = append(sent, out)
			next = srv.NextReplyBuffer(out, n)
			if !assert.Len(t, next, n) {
				filled, next = nil, nil
				k++
				return out
			}
			require.False(t, unsafe.SliceData(next) == unsafe.SliceData(out), "the lease is the buffer the reply goes from")
			k++
			filled = make(chan struct{})
			fills.Add(1)
			go func(b []byte, seed byte, done chan struct{}) {
				defer fills.Done()
				fill(b, seed)
				close(done)
			}(next, byte(k), filled)
			return out
		})
		for i := 0; i < calls; i++ {
			got, err := callT(t, cli, proto, []byte{byte(i)})
			require.NoError(t, err)
			want := make([]byte, n)
			fill(want, byte(i))
			require.Equal(t, want, got, "reply %d", i)
		}
		// Two buffers, alternating: a reply from the lease went
		// without a copy into the other. (An RFP reply that fits
		// the response buffer is copied there for fetching.)
		require.Len(t, sent, calls)
		if proto == ProtoRFP && n <= cfg.RespSize {
			return
		}
		requireAlternating(t, sent, "reply")
	})
}

// NextRequestBuffer lends a client the staging buffer the next Call's
// request does not go from: another goroutine fills the request after it
// there while that Call runs, and the server gets each request whole with
// its own bytes, by every protocol, in both polling modes; from the
// second on each goes from where it was filled, the two buffers in turn.
func TestNextRequestBuffer(t *testing.T) {
	const calls = 8
	forNextBufferCases(t, func(t *testing.T, poll Polling, proto Protocol, n int) {
		cfg := testEPConfig(poll)
		cli, srv := newRPCPair(t, cfg, cfg, false)
		var fills sync.WaitGroup
		t.Cleanup(fills.Wait) // before the endpoints close
		// The server answers each request with its digest: its
		// first and last bytes, its length.
		serve(t, srv, proto, func(req []byte) []byte {
			if len(req) == 0 {
				return []byte{}
			}
			return []byte{req[0], req[len(req)-1], byte(len(req) >> 16)}
		})
		req := cli.RequestBuffer(n)
		require.Len(t, req, n)
		fill(req, 0)
		var sent [][]byte
		for i := range calls {
			next := cli.NextRequestBuffer(req, n)
			require.Len(t, next, n)
			require.False(t, unsafe.SliceData(next) == unsafe.SliceData(req), "the lease is the buffer the request goes from")
			filled := make(chan struct{})
			fills.Add(1)
			go func(b []byte, seed byte) {
				defer fills.Done()
				fill(b, seed)
				close(filled)
			}(next, byte(i+1))
			got, err := callT(t, cli, proto, req)
			require.NoError(t, err)
			want := make([]byte, n)
			fill(want, byte(i))
			require.Equal(t, []byte{want[0], want[n-1], byte(n >> 16)}, got, "request %d", i)
			sent = append(sent, req)
			<-filled
			req = next
		}
		requireAlternating(t, sent, "request")
	})
}

// forNextBufferCases runs f for every polling mode, protocol and size the
// staging leases are tested at.
func forNextBufferCases(t *testing.T, f func(t *testing.T, poll Polling, proto Protocol, n int)) {
	for _, poll := range []Polling{PollBusy, PollEvent} {
		for _, proto := range []Protocol{ProtoEager, ProtoWriteRNDV, ProtoReadRNDV, ProtoDirectWriteIMM, ProtoChainedWriteSend, ProtoRFP} {
			for _, n := range []int{100, 64 << 10, 1 << 20} {
				t.Run(fmt.Sprintf("%s/%s/%d", poll, proto, n), func(t *testing.T) { f(t, poll, proto, n) })
			}
		}
	}
}

// requireAlternating: from the third on, each message went from the
// buffer the one two before it went from, not the one just before (two
// staging buffers in turn, no copy between them).
func requireAlternating(t *testing.T, sent [][]byte, what string) {
	t.Helper()
	for i := 2; i < len(sent); i++ {
		require.True(t, unsafe.SliceData(sent[i]) == unsafe.SliceData(sent[i-2]), "%s %d", what, i)
		require.False(t, unsafe.SliceData(sent[i]) == unsafe.SliceData(sent[i-1]), "%s %d", what, i)
	}
}
