package rdma

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
)

var protoSizes = []int{0, 64, 4 << 10, 4<<10 + 1, 8<<10 + 1, 64 << 10, 64<<10 + 1, 1 << 20, 16 << 20}

func callsFor(n int) int {
	if n >= 1<<20 {
		return 1
	}
	return 4
}

// TestProtocolConformance runs every protocol, both polling modes, 0 B to
// 16 MiB, checking the bytes end to end by checksum and the exact verbs
// operations each side posted, from the provider's counters.
func TestProtocolConformance(t *testing.T) {
	for _, proto := range Protocols() {
		for _, poll := range []Polling{PollBusy, PollEvent} {
			t.Run(fmt.Sprintf("%v/%v", proto, poll), func(t *testing.T) {
				cfg := testEPConfig(poll)
				cli, srv := newRPCPair(t, cfg, cfg, false)
				rec := &recorder{}
				serve(t, srv, proto, rec.handle)
				for _, n := range protoSizes {
					checkCalls(t, cli, srv, rec, proto, cfg, cfg, n, callsFor(n))
				}
			})
		}
	}
}

func checkCalls(t *testing.T, cli, srv *RPCEndpoint, rec *recorder, proto Protocol, cfg, scfg EndpointConfig, n, calls int) {
	t.Helper()
	c0, s0 := counters(t, cli), counters(t, srv)
	st0 := cli.Stats()
	first := rec.count()
	for i := 0; i < calls; i++ {
		req := make([]byte, n)
		fill(req, byte(i*31+n))
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		resp, err := cli.Call(ctx, proto, req)
		cancel()
		require.NoError(t, err, "%d B call %d", n, i)
		require.Equal(t, sha256.Sum256(expectedResp(req, n)), sha256.Sum256(resp), "%d B response %d", n, i)
		require.Equal(t, sha256.Sum256(req), rec.sum(first+i), "%d B request %d", n, i)
	}
	c1, s1 := counters(t, cli), counters(t, srv)
	st1 := cli.Stats()
	require.Equal(t, uint64(calls), st1.Calls-st0.Calls)

	var wantC, wantS [NumOpcodes]uint64
	reqS, reqR := oneWay(proto, n, scfg, scfg.Polling == PollEvent)
	addOps(&wantC, reqS, uint64(calls))
	addOps(&wantS, reqR, uint64(calls))
	if proto == ProtoRFP {
		// Fetch mode: the server posts nothing for the response; the
		// client READs F bytes until the response is there, then the rest.
		fetches := st1.RFPFetches - st0.RFPFetches
		retries := st1.RFPRetries - st0.RFPRetries
		rest := st1.RFPRestReads - st0.RFPRestReads
		require.Equal(t, uint64(calls), fetches-retries, "%d B: one successful fetch per call %+v %+v", n, st0, st1)
		wantRest := uint64(0)
		if msgHdr+n+msgTail > cfg.RFPFetchSize {
			wantRest = uint64(calls)
		}
		require.Equal(t, wantRest, rest, "%d B: reads beyond F", n)
		wantC[OpRDMARead] += fetches + rest
		require.False(t, st1.RFPServerReply)
	} else {
		rs, rr := oneWay(proto, n, cfg, cfg.Polling == PollEvent)
		addOps(&wantS, rs, uint64(calls))
		addOps(&wantC, rr, uint64(calls))
	}
	require.Equal(t, wantC, postedDelta(c0, c1), "%d B: client posted %v", n, effective(proto, n, cfg))
	require.Equal(t, wantS, postedDelta(s0, s1), "%d B: server posted", n)
	if proto == ProtoRFP && effective(proto, n, cfg) == ProtoRFP {
		require.Equal(t, [NumOpcodes]uint64{}, wantS, "RFP fetch: the server posts nothing")
		require.Zero(t, c1.Inbound[OpSend]-c0.Inbound[OpSend], "RFP fetch: nothing is sent to the client")
	}
}

// TestProtocolMixedPolling: client and server wait differently; a server
// that blocks on events gets its RFP requests by WRITE_WITH_IMM.
func TestProtocolMixedPolling(t *testing.T) {
	for _, proto := range Protocols() {
		for _, mix := range [][2]Polling{{PollBusy, PollEvent}, {PollEvent, PollBusy}} {
			t.Run(fmt.Sprintf("%v/client-%v/server-%v", proto, mix[0], mix[1]), func(t *testing.T) {
				cc, sc := testEPConfig(mix[0]), testEPConfig(mix[1])
				cli, srv := newRPCPair(t, cc, sc, false)
				rec := &recorder{}
				serve(t, srv, proto, rec.handle)
				for _, n := range []int{0, 300, 70 << 10} {
					checkCalls(t, cli, srv, rec, proto, cc, sc, n, 3)
				}
			})
		}
	}
}

// TestProtocolTwoDevices runs the one-sided protocols between two shm
// devices, where the peer's memory is a separate mapping.
func TestProtocolTwoDevices(t *testing.T) {
	for _, proto := range []Protocol{ProtoDirectWriteIMM, ProtoRFP, ProtoReadRNDV, ProtoWriteRNDV} {
		t.Run(proto.String(), func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			cli, srv := newRPCPair(t, cfg, cfg, true)
			rec := &recorder{}
			serve(t, srv, proto, rec.handle)
			for _, n := range []int{0, 300, 70 << 10, 2 << 20} {
				checkCalls(t, cli, srv, rec, proto, cfg, cfg, n, 2)
			}
		})
	}
}

// TestRFPAsymmetric: small requests, responses around F and beyond the
// response buffer (served from the pool, the header pointing at it).
func TestRFPAsymmetric(t *testing.T) {
	for _, resp := range []int{0, 256 - msgHdr - msgTail, 256 - msgHdr - msgTail + 1, 64 << 10, 64<<10 + 1, 3 << 20} {
		t.Run(fmt.Sprint(resp), func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			rec := &recorder{respSize: func(int) int { return resp }}
			serve(t, srv, ProtoRFP, rec.handle)
			c0, s0 := counters(t, cli), counters(t, srv)
			for i := 0; i < 3; i++ {
				req := []byte{byte(i), 1, 2, 3}
				got, err := callT(t, cli, ProtoRFP, req)
				require.NoError(t, err)
				require.Equal(t, sha256.Sum256(expectedResp(req, resp)), sha256.Sum256(got))
			}
			c1, s1 := counters(t, cli), counters(t, srv)
			st := cli.Stats()
			require.Equal(t, [NumOpcodes]uint64{}, postedDelta(s0, s1), "server posts nothing")
			require.Equal(t, uint64(3), postedDelta(c0, c1)[OpRDMAWrite])
			rest := uint64(0)
			if msgHdr+resp+msgTail > cfg.RFPFetchSize {
				rest = 3
			}
			require.Equal(t, rest, st.RFPRestReads)
			require.Equal(t, st.RFPFetches+st.RFPRestReads, postedDelta(c0, c1)[OpRDMARead])
		})
	}
}

// TestRFPFetchOverheadMatchesHints: the planner's tiny limit for a fetch
// size (hints.ShmTinyLimit, from hints.RFPFetchOverhead, which cannot
// import this package) is the largest response one fetch holds here: a
// byte more takes a second READ. (The fetch sizes are those where the
// fetch, not ShmTinyMessage, sets the limit.)
func TestRFPFetchOverheadMatchesHints(t *testing.T) {
	require.Equal(t, MinFetchSize, hints.RFPFetchOverhead)
	for _, fetch := range []int{MinFetchSize + 1, 128, 200} {
		for _, extra := range []int{0, 1} {
			resp := hints.ShmTinyLimit(fetch) + extra
			t.Run(fmt.Sprintf("fetch %d resp %d", fetch, resp), func(t *testing.T) {
				cfg := testEPConfig(PollBusy)
				cfg.RFPFetchSize = fetch
				cli, srv := newRPCPair(t, cfg, cfg, false)
				rec := &recorder{respSize: func(int) int { return resp }}
				serve(t, srv, ProtoRFP, rec.handle)
				req := []byte{1, 2, 3}
				got, err := callT(t, cli, ProtoRFP, req)
				require.NoError(t, err)
				require.Equal(t, expectedResp(req, resp), got)
				require.Equal(t, uint64(extra), cli.Stats().RFPRestReads)
			})
		}
	}
}

// callInverted calls with a request of n bytes built in cli's request
// buffer and checks the reply is the request inverted (the servers of the
// lease tests answer so, in their reply buffers).
func callInverted(t testing.TB, cli *RPCEndpoint, proto Protocol, n int) {
	t.Helper()
	req := cli.RequestBuffer(n)
	require.Len(t, req, n)
	fill(req, byte(n))
	want := make([]byte, n)
	for i := range req {
		want[i] = ^req[i]
	}
	got, err := callT(t, cli, proto, req)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func callT(t testing.TB, e *RPCEndpoint, p Protocol, req []byte) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return e.Call(ctx, p, req)
}

// TestRFPFallbackAndReturn: two consecutive calls that need more than R
// fetches switch the client to server-reply (the server then SENDs, the
// client READs nothing); a fast call brings it back to fetching. A fast call
// may exceed R on a loaded machine, so the expected mode is replayed from
// what each call observed; slow calls must always exceed.
func TestRFPFallbackAndReturn(t *testing.T) {
	for _, poll := range []Polling{PollBusy, PollEvent} {
		t.Run(poll.String(), func(t *testing.T) {
			cfg := testEPConfig(poll)
			cfg.RFPRetries = 20000 // margin for fast calls on a loaded host
			cli, srv := newRPCPair(t, cfg, cfg, false)
			const slow, fast = true, false
			plan := []bool{fast, slow, fast, slow, slow, slow, fast, fast}
			// "Slow" is defined by the client, not by a clock: so the test
			// holds on a loaded host and under emulation alike.
			var before atomic.Pointer[rfpCallStart]
			rec := &recorder{wait: func(i int) {
				if i < len(plan) && plan[i] {
					rfpSlowServer(t, cli, cfg.RFPRetries, before.Load())
				}
			}}
			serve(t, srv, ProtoRFP, rec.handle)
			reply, prev, replyCalls := false, false, 0
			// A fast call in server-reply mode goes back to fetching when
			// the server's time, measured by its clock, fits in R
			// fetches; on a loaded host it may not. So the plan ends with
			// fast calls until it has (bounded), and each call replays
			// the client's rule with the server time the reply carried.
			for i := 0; i < len(plan) || (reply && i < len(plan)+100); i++ {
				d := fast
				if i < len(plan) {
					d = plan[i]
				}
				c0, s0 := counters(t, cli), counters(t, srv)
				st0 := cli.Stats()
				before.Store(&rfpCallStart{reads: c0.Posted[OpRDMARead], stats: st0})
				req := []byte(fmt.Sprintf("call %d", i))
				got, err := callT(t, cli, ProtoRFP, req)
				require.NoError(t, err, "call %d", i)
				require.Equal(t, expectedResp(req, len(req)), got)
				c1, s1 := counters(t, cli), counters(t, srv)
				st1 := cli.Stats()
				dc, ds := postedDelta(c0, c1), postedDelta(s0, s1)
				if reply {
					replyCalls++
					require.Equal(t, uint64(1), st1.RFPReplyCalls-st0.RFPReplyCalls, "call %d", i)
					require.Zero(t, dc[OpRDMARead], "call %d: no fetch in server-reply", i)
					require.Equal(t, uint64(1), ds[OpSend], "call %d: the server sends", i)
					if d == slow {
						require.Greater(t, st1.LastServerNS, uint64(cfg.RFPRetries)*st0.FetchNS, "call %d: slept beyond R fetches", i)
					}
					reply = st1.LastServerNS > uint64(cfg.RFPRetries)*st0.FetchNS
				} else {
					require.Zero(t, ds[OpSend]+ds[OpRDMAWrite]+ds[OpRDMAWriteWithImm], "call %d: server silent", i)
					require.GreaterOrEqual(t, dc[OpRDMARead], uint64(1), "call %d", i)
					exceeded := st1.RFPExceeded > st0.RFPExceeded
					if d == slow {
						require.True(t, exceeded, "call %d: slow call within R", i)
					}
					// Replay the client: the second exceeded call in a
					// row switches to server-reply.
					reply = exceeded && prev
					prev = exceeded && !reply
				}
				require.Equal(t, reply, st1.RFPServerReply, "call %d mode %+v", i, st1)
			}
			st := cli.Stats()
			require.GreaterOrEqual(t, replyCalls, 1)
			require.GreaterOrEqual(t, st.RFPToReply, uint64(1))
			require.GreaterOrEqual(t, st.RFPToFetch, uint64(1))
			require.False(t, st.RFPServerReply)
		})
	}
}

// rfpSlowServer holds the handler until the client counts the call as slow:
// while fetching, until it has exceeded R fetches; in server-reply mode,
// for twice R fetches' time, which keeps the client there.
//
// The client's stats are locked while it calls; its QP counters are not: the
// (R+2)-th fetch READ is posted only after the (R+1)-th failed, which is
// when the call counts as exceeded.
func rfpSlowServer(t *testing.T, cli *RPCEndpoint, r int, start *rfpCallStart) {
	if start.stats.RFPServerReply {
		time.Sleep(2 * time.Duration(r) * time.Duration(start.stats.FetchNS))
		return
	}
	deadline := time.Now().Add(testenv.HangGuard(time.Minute))
	for {
		c, err := cli.Counters()
		if err != nil || c.Posted[OpRDMARead]-start.reads >= uint64(r)+2 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the client never exceeded %d fetches", r)
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// rfpCallStart is the client's state as a call begins.
type rfpCallStart struct {
	reads uint64
	stats EndpointStats
}

// TestEndpointZeroCopyLeases: a request built in RequestBuffer and a
// response built in ReplyBuffer travel without the Go-side copies.
func TestEndpointZeroCopyLeases(t *testing.T) {
	for _, proto := range []Protocol{ProtoEager, ProtoRFP, ProtoReadRNDV} {
		t.Run(proto.String(), func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				for {
					req, err := srv.Recv(ctx)
					if err != nil {
						done <- nil
						return
					}
					out := srv.ReplyBuffer(len(req))
					for i := range req {
						out[i] = ^req[i]
					}
					if err := srv.Reply(ctx, proto, out); err != nil {
						done <- err
						return
					}
				}
			}()
			defer func() { cancel(); require.NoError(t, <-done) }()
			for _, n := range []int{1, 100, 20 << 10, 200 << 10} {
				callInverted(t, cli, proto, n)
			}
		})
	}
}

func TestEndpointErrors(t *testing.T) {
	cfg := testEPConfig(PollBusy)
	t.Run("refused arguments keep the endpoint", func(t *testing.T) {
		cli, srv := newRPCPair(t, cfg, cfg, false)
		serve(t, srv, ProtoEager, func(req []byte) []byte { return req })
		_, err := callT(t, cli, ProtoEager, make([]byte, cfg.MaxMessage+1))
		require.ErrorIs(t, err, ErrInvalid)
		_, err = callT(t, cli, Protocol(99), nil)
		require.ErrorIs(t, err, ErrInvalid)
		_, err = ParseProtocol("carrier_pigeon")
		require.ErrorIs(t, err, ErrInvalid)
		got, err := callT(t, cli, ProtoEager, []byte("still fine"))
		require.NoError(t, err)
		require.Equal(t, "still fine", string(got))
	})
	t.Run("not connected", func(t *testing.T) {
		e := newEndpoint(t, newPD(t, openTest(t)), cfg)
		_, err := callT(t, e, ProtoEager, []byte("x"))
		require.ErrorIs(t, err, ErrBadState)
	})
	// spin: event mode whose whole wait is its spin phase, where the
	// deadline and cancel flag are looked at only every few dozen polls.
	spin := testEPConfig(PollEvent)
	spin.SpinTime = time.Minute
	modes := []struct {
		name string
		cfg  EndpointConfig
	}{{"busy", testEPConfig(PollBusy)}, {"event", testEPConfig(PollEvent)}, {"spin", spin}}
	for _, m := range modes {
		t.Run("deadline/"+m.name, func(t *testing.T) {
			c := m.cfg
			cli, _ := newRPCPair(t, c, c, false) // nobody serves
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := cli.Call(ctx, ProtoRFP, []byte("hello"))
			require.ErrorIs(t, err, context.DeadlineExceeded)
			// The exchange was cut: the endpoint is broken from now on.
			_, err = callT(t, cli, ProtoEager, []byte("x"))
			require.ErrorIs(t, err, ErrBadState)
		})
		// CallWithin: the timeout its caller read from ctx bounds the
		// exchange, and ctx still ends it.
		t.Run("within-deadline/"+m.name, func(t *testing.T) {
			c := m.cfg
			cli, _ := newRPCPair(t, c, c, false)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			dl, _ := ctx.Deadline()
			_, err := cli.CallWithin(ctx, ProtoRFP, []byte("hello"), time.Until(dl))
			require.ErrorIs(t, err, context.DeadlineExceeded)
		})
		t.Run("within-timeout/"+m.name, func(t *testing.T) {
			c := m.cfg
			cli, _ := newRPCPair(t, c, c, false)
			_, err := cli.CallWithin(context.Background(), ProtoRFP, []byte("hello"), 30*time.Millisecond)
			require.ErrorIs(t, err, ErrTimedOut)
		})
		t.Run("within-cancel/"+m.name, func(t *testing.T) {
			c := m.cfg
			cli, _ := newRPCPair(t, c, c, false)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(30*time.Millisecond, cancel)
			_, err := cli.CallWithin(ctx, ProtoEager, []byte("hello"), 0)
			require.ErrorIs(t, err, context.Canceled)
		})
		t.Run("cancel/"+m.name, func(t *testing.T) {
			c := m.cfg
			cli, _ := newRPCPair(t, c, c, false)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(30*time.Millisecond, cancel)
			start := time.Now()
			_, err := cli.Call(ctx, ProtoEager, []byte("hello"))
			require.ErrorIs(t, err, context.Canceled)
			require.Less(t, time.Since(start), testTimeout) // nobody serves: only cancel ends it, so a hang guard
		})
	}
	t.Run("peer gone", func(t *testing.T) {
		cli, srv := newRPCPair(t, cfg, cfg, false)
		require.NoError(t, srv.qp.SetError())
		_, err := callT(t, cli, ProtoDirectWriteIMM, []byte("x"))
		require.Error(t, err)
		require.False(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	})
	t.Run("closed", func(t *testing.T) {
		e, err := NewRPCEndpoint(newPD(t, openTest(t)), cfg)
		require.NoError(t, err)
		require.NoError(t, e.Close())
		require.ErrorIs(t, e.Close(), ErrClosed)
		_, err = callT(t, e, ProtoEager, nil)
		require.ErrorIs(t, err, ErrClosed)
	})
	t.Run("peer is not an endpoint", func(t *testing.T) {
		d := openTest(t)
		pd := newPD(t, d)
		e := newEndpoint(t, pd, cfg)
		plain := newSide(t, d, pd, sideCfg{})
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		ca, cb := net.Pipe()
		defer ca.Close()
		defer cb.Close()
		errc := make(chan error, 1)
		go func() { _, err := plain.qp.Bootstrap(ctx, cb, plain.mr.Remote()); errc <- err }()
		require.ErrorIs(t, e.Bootstrap(ctx, ca), ErrBadBootstrap)
		require.NoError(t, <-errc)
		_, err := callT(t, e, ProtoEager, []byte("x"))
		require.ErrorIs(t, err, ErrBadState)
	})
	t.Run("setup failure unwinds", func(t *testing.T) {
		// Each setup step in turn fails; whatever the steps before it
		// created is released (the PD's and device's Close in cleanup fail
		// on any leftover QP, CQ or registration).
		d := openTest(t)
		pd := newPD(t, d)
		steps := 0
		for ; ; steps++ {
			injectSetupFailure(steps)
			e, err := NewRPCEndpoint(pd, cfg)
			injectSetupFailure(-1)
			if err == nil {
				require.NoError(t, e.Close())
				break
			}
			require.ErrorIs(t, err, ErrNoMem, "step %d", steps)
		}
		require.GreaterOrEqual(t, steps, 9, "every region, the channel, the CQ and the QP")
		e, err := NewRPCEndpoint(pd, cfg)
		require.NoError(t, err)
		require.NoError(t, e.Close())
	})
	t.Run("bad config", func(t *testing.T) {
		c := cfg
		c.SignalInterval = c.MaxSendWR // must leave room for unsignaled WRs
		_, err := NewRPCEndpoint(newPD(t, openTest(t)), c)
		require.ErrorIs(t, err, ErrInvalid)
	})
}

// TestEndpointEchoAliasing: a handler may answer with the request lease
// itself (slot, pre-known buffer or pool memory), with inlining off.
func TestEndpointEchoAliasing(t *testing.T) {
	for _, proto := range Protocols() {
		t.Run(proto.String(), func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			cfg.InlineThreshold = -1
			cli, srv := newRPCPair(t, cfg, cfg, false)
			serve(t, srv, proto, func(req []byte) []byte { return req })
			for _, n := range []int{0, 100, 100 << 10} {
				req := make([]byte, n)
				fill(req, byte(n))
				got, err := callT(t, cli, proto, req)
				require.NoError(t, err)
				require.Equal(t, req, got)
			}
		})
	}
}

// TestProtocolNamesMatchHints: the runtime maps a plan's protocol by name.
func TestProtocolNamesMatchHints(t *testing.T) {
	var names []string
	for p := hints.ProtoEager; p <= hints.ProtoHybrid; p++ {
		names = append(names, p.String())
	}
	require.Len(t, names, NumProtocols)
	for i, n := range names {
		p, err := ParseProtocol(n)
		require.NoError(t, err, n)
		require.Equal(t, Protocol(i), p)
		require.Equal(t, n, p.String())
	}
}

// TestSelectiveSignaling: one send WR in SignalInterval produces a
// completion; every receive does (Direct-WriteIMM consumes one per message).
func TestSelectiveSignaling(t *testing.T) {
	const calls = 64
	for _, interval := range []int{1, 8, 32} {
		t.Run(fmt.Sprint(interval), func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			cfg.SignalInterval = interval
			cli, srv := newRPCPair(t, cfg, cfg, false)
			serve(t, srv, ProtoDirectWriteIMM, func(req []byte) []byte { return req })
			c0, s0 := counters(t, cli), counters(t, srv)
			for i := 0; i < calls; i++ {
				_, err := callT(t, cli, ProtoDirectWriteIMM, []byte{byte(i)})
				require.NoError(t, err)
			}
			// The last reply can reach the client before the server has
			// polled that reply's own send completion (its ACK may still be
			// on the wire, as on rxe), so each side's count is awaited; the
			// bound only keeps a missing completion from hanging the test.
			want := uint64(calls + calls/interval)
			for _, side := range []struct {
				name string
				ep   *RPCEndpoint
				base uint64
			}{{"client", cli, c0.Completions}, {"server", srv, s0.Completions}} {
				var got uint64
				require.Eventually(t, func() bool {
					got = counters(t, side.ep).Completions - side.base
					return got >= want
				}, testenv.HangGuard(30*time.Second), time.Millisecond, "%s completions", side.name)
				require.Equal(t, want, got, side.name)
			}
			require.Zero(t, counters(t, cli).Errors-c0.Errors)
		})
	}
}

// TestEndpointLeaseOffsets: payloads taken from inside the leases at an
// offset (overlapping where the engine stages them) arrive intact, also
// when the staging buffer has to grow.
func TestEndpointLeaseOffsets(t *testing.T) {
	for _, proto := range []Protocol{ProtoEager, ProtoRFP, ProtoWriteRNDV} {
		t.Run(proto.String(), func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			serve(t, srv, proto, func(req []byte) []byte {
				out := srv.ReplyBuffer(len(req) + 7)
				copy(out[7:], req)
				return out[7:]
			})
			for _, n := range []int{10, 5000, 300 << 10, 2 << 20} {
				buf := cli.RequestBuffer(n + 13)
				require.Len(t, buf, n+13)
				req := buf[13:]
				fill(req, byte(n))
				want := append([]byte(nil), req...)
				got, err := callT(t, cli, proto, req)
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
		})
	}
}

// TestReceiveRepostedAtNextWait: a reply's receive slot goes back to the
// QP when the endpoint next waits for a message, after the next request is
// out (re-posting it before would put the transfer of its record on the
// message's path), so after call k exactly k-1 replies' slots are back;
// calls well past the slot count still work.
func TestReceiveRepostedAtNextWait(t *testing.T) {
	for _, proto := range []Protocol{ProtoEager, ProtoDirectWriteIMM} {
		t.Run(proto.String(), func(t *testing.T) {
			cfg := testEPConfig(PollBusy)
			cli, srv := newRPCPair(t, cfg, cfg, false)
			serve(t, srv, proto, func(req []byte) []byte { return req })
			base := counters(t, cli).RecvPosted
			calls := 3 * cfg.Slots
			for k := 1; k <= calls; k++ {
				resp, err := callT(t, cli, proto, []byte{byte(k), 1, 2, 3})
				require.NoError(t, err)
				require.Equal(t, []byte{byte(k), 1, 2, 3}, resp)
				require.Equal(t, uint64(k-1), counters(t, cli).RecvPosted-base, "after call %d", k)
			}
			require.Zero(t, counters(t, cli).Errors)
		})
	}
}
