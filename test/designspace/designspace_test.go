//go:build cgo && linux

package designspace

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const service = "DS"

// Routes, as the counters name them.
const (
	routeTCP   = "tcp"
	routeLane  = "lane"
	routeFLOCK = "flock"
)

// want is what one call of n bytes each way does, by the plan: the route
// it leaves by and the protocol each side's message goes by.
type want struct {
	route  string
	client string // the request's engine protocol ("" off lanes)
	// server is the reply's: an engine protocol on a lane, "flock"
	// through FLOCK, "" over TCP. serverAlt, when set, is the other
	// value the plan allows: what adapts at run time by design (an RFP
	// client switched to server-reply gets the reply by the server's
	// own protocol, hybrid for rfp).
	server, serverAlt string
	// batched: the call travels in an RF-RPC batch frame, whose engine
	// message is the call's frame plus one frame header.
	batched bool
}

// tables are the two sides' plans of fn on transport tr, built as the
// runtime builds them (Conn.Plan, Server.Plan) and as hatgen explain
// prints them: the test checks the runtime's are these.
func tables(fn hints.Function, tr hints.Transport) (ct, st hints.Table) {
	cores := runtime.NumCPU()
	ct = hints.TableFor(fn.Client, hints.Env{Side: hints.SideClient, Transport: tr, Cores: cores, PeerPayload: fn.Server.PayloadSize})
	st = hints.TableFor(fn.Server, hints.Env{Side: hints.SideServer, Transport: tr, Cores: cores, PeerPayload: fn.Client.PayloadSize})
	return ct, st
}

// expected is the one place this test says what should run: the row of
// each side's plan table for n bytes (route and protocol), and what the
// tables declare adapts (hints.AdaptRendezvous: past the peer's buffer a
// message goes by write_rndv, engineSends; hints.AdaptRFPServerReply: a
// client that does not fetch is sent an RFP reply by the engine's
// choice, and a fetching one reads it). fast is the transport the server
// grants this client (shm, or rdma on ibv).
func expected(fn hints.Function, fast hints.Transport, n int) want {
	tr := fastpath.PickTransport(fn.Client.Transport, capOf(fast))
	ct, st := tables(fn, tr)
	row := ct.RowFor(n)
	switch row.Route {
	case hints.RouteTCP:
		return want{route: routeTCP}
	case hints.RouteFLOCK:
		return want{route: routeFLOCK, server: routeFLOCK}
	}
	cc, sc := fastpath.PlanSide(&ct, 0).Config, fastpath.PlanSide(&st, 0).Config
	w := want{route: routeLane, batched: fn.Client.Batch != hints.BatchOff}
	cp := fastpath.EngineProtocol(row.Protocol)
	w.client = engineSends(cp, n, cc, sc).String()
	sp := fastpath.EngineProtocol(st.LaneRowFor(n).Protocol)
	if sp == rdma.ProtoRFP {
		sp = rdma.ProtoHybrid // a client that does not fetch is sent the reply
	}
	w.server = engineSends(sp, n, sc, cc).String()
	if cp == rdma.ProtoRFP {
		// A fetching client reads the reply the server left for it.
		w.server, w.serverAlt = rdma.ProtoRFP.String(), w.server
	}
	return w
}

// engineSends is the engine's size switch (hrp_send_msg): what a message
// of n bytes planned as p goes by, given this side's endpoint and the
// peer's (whose slots and pre-known buffer it must fit).
func engineSends(p rdma.Protocol, n int, own, peer rdma.EndpointConfig) rdma.Protocol {
	switch p {
	case rdma.ProtoHybrid:
		if n <= own.EagerThreshold && n <= peer.SlotSize {
			return rdma.ProtoEager
		}
		return rdma.ProtoWriteRNDV
	case rdma.ProtoEager:
		if n > peer.SlotSize {
			return rdma.ProtoWriteRNDV
		}
	case rdma.ProtoDirectWriteSend, rdma.ProtoChainedWriteSend, rdma.ProtoDirectWriteIMM, rdma.ProtoRFP:
		// The runtime sizes the pre-known buffer at least this large.
		if n > peer.DirectSize {
			return rdma.ProtoWriteRNDV
		}
	}
	return p
}

// boundaries are the message sizes where fn's plan changes rows, on
// either side: b-1, b and b+1 for every row edge of both tables (lane
// rows too: a call that leaves FLOCK takes them), and FLOCK's largest
// message when the function shares.
func boundaries(fn hints.Function, fast hints.Transport) []int {
	tr := fastpath.PickTransport(fn.Client.Transport, capOf(fast))
	if tr == hints.TransportTCP {
		tr = fast // the sizes still cross the plan's rows; the route stays TCP
	}
	ct, st := tables(fn, tr)
	var bs []int
	for _, rows := range [][]hints.Row{ct.Rows, ct.Lane, st.Rows, st.Lane} {
		for _, r := range rows {
			if r.Max != hints.NoBound {
				bs = append(bs, r.Max)
			}
		}
	}
	if ct.QPSharing {
		bs = append(bs, fastpath.FlockMaxMessage)
	}
	seen := map[int]bool{}
	var out []int
	for _, b := range bs {
		for _, n := range []int{b - 1, b, b + 1} {
			if n > 0 && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Ints(out)
	return out
}

func capOf(tr hints.Transport) uint64 {
	if tr == hints.TransportRDMA {
		return wire.CapRDMA
	}
	return wire.CapSHM
}

// TestDesignSpace makes real calls for every sampled hint set at every
// row boundary and checks, from the counters of both sides, that the
// route and each side's engine protocol are the plan's (expected).
func TestDesignSpace(t *testing.T) {
	cores := runtime.NumCPU()
	fast := fastpathtest.HintTransport()
	fns := sample(cores, fast)
	srv, addr := startServer(t, fns)
	var cases, calls int
	adaptive := map[string]int{}
	ran := map[string]int{} // what ran, by route and protocol: the spread the cases cover
	for _, fn := range fns {
		start := time.Now()
		func() {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
			defer cancel()
			conn, err := client.Dial(ctx, addr, client.WithRDMA(fastpathtest.Provider()))
			require.NoError(t, err)
			defer conn.Close()
			m := &client.Method{Service: service, Name: fn.Name, Hints: &fn}
			for _, n := range boundaries(fn, fast) {
				w := expected(fn, fast, n)
				got := call(t, ctx, conn, srv, fn, m, w, n)
				calls++
				cases += 2 // the client's side and the server's
				require.Equal(t, w.route, got.route, "%s %d B: the route (client %s, server %s)", fn.Name, n, hints.GoLiteral(fn.Client), hints.GoLiteral(fn.Server))
				require.Equal(t, w.route, got.serverRoute, "%s %d B: the server's route", fn.Name, n)
				require.Equal(t, w.client, got.client, "%s %d B: the request's protocol (client %s)", fn.Name, n, hints.GoLiteral(fn.Client))
				if w.serverAlt != "" && got.server == w.serverAlt {
					adaptive[fmt.Sprintf("%s reply by %s", w.server, got.server)]++
				} else {
					require.Equal(t, w.server, got.server, "%s %d B: the reply's protocol (server %s)", fn.Name, n, hints.GoLiteral(fn.Server))
				}
				ran[fmt.Sprintf("%s client=%s server=%s", got.route, got.client, got.server)]++
			}
			// What the runtime says it runs is the table explain prints.
			tr := fastpath.PickTransport(fn.Client.Transport, capOf(fast))
			ct, st := tables(fn, tr)
			require.Equal(t, ct, conn.Plan(fn.Name), "%s: Conn.Plan", fn.Name)
			require.Equal(t, st, srv.Plan(fn.Name, tr), "%s: Server.Plan", fn.Name)
		}()
		t.Logf("%s: %d sizes in %v", fn.Name, len(boundaries(fn, fast)), time.Since(start).Round(time.Millisecond))
	}
	t.Logf("design space: %d hint samples, %d calls, %d (sample x side x size) cases checked on %s (%d cores)",
		len(fns), calls, cases, fast, cores)
	keys := make([]string, 0, len(ran))
	for k := range ran {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("  ran %s: %d calls", k, ran[k])
	}
	for k, v := range adaptive {
		t.Logf("adapted at run time: %s in %d calls (RFP client in server-reply mode)", k, v)
	}
}

// observed is what the counters of both sides saw for one call.
type observed struct {
	route, client       string
	serverRoute, server string
}

// call makes one call whose request and reply are engine messages of n
// bytes and reads what both sides counted for it.
func call(t *testing.T, ctx context.Context, conn *client.Conn, srv *server.Server, fn hints.Function, m *client.Method, w want, n int) observed {
	t.Helper()
	frame := n
	if w.batched {
		frame -= wire.HeaderSize
	}
	name := service + ":" + fn.Name
	pad := frame - frameSize(proto.Call, name, &wiretest.EchoArgs{Mode: 1})
	replyLen := frame - frameSize(proto.Reply, fn.Name, &wiretest.EchoResult{Success: new(string)})
	require.True(t, pad >= 0 && replyLen >= 0, "%d B is below a call's frame", n)
	r0, c0, s0 := conn.RouteStats(), laneSent(conn, name), serverCounts(t, srv, fn.Name)
	var res wiretest.EchoResult
	cctx, cancel := context.WithTimeout(ctx, testenv.HangGuard(30*time.Second))
	defer cancel()
	require.NoError(t, conn.Call(cctx, m, &wiretest.EchoArgs{Msg: strings.Repeat("q", pad), Mode: int32(replyLen + 1)}, &res))
	require.NotNil(t, res.Success)
	require.Len(t, *res.Success, replyLen)

	var got observed
	r1 := conn.RouteStats()
	switch {
	case r1.TCP == r0.TCP+1 && r1.Lane == r0.Lane && r1.FLOCK == r0.FLOCK:
		got.route = routeTCP
	case r1.Lane == r0.Lane+1 && r1.TCP == r0.TCP && r1.FLOCK == r0.FLOCK:
		got.route = routeLane
	case r1.FLOCK == r0.FLOCK+1 && r1.TCP == r0.TCP && r1.Lane == r0.Lane:
		got.route = routeFLOCK
	default:
		t.Fatalf("%s %d B: routes before %+v, after %+v: not one call on one route", fn.Name, n, r0, r1)
	}
	got.client = oneDelta(t, c0, laneSent(conn, name), "client "+fn.Name)
	// A side counts its reply once it is sent, which the client's answer
	// may beat by a moment.
	var s1 map[string]float64
	for deadline := time.Now().Add(testenv.HangGuard(time.Minute)); ; time.Sleep(time.Millisecond) {
		s1 = serverCounts(t, srv, fn.Name)
		if s1["calls"]-s0["calls"] == 1 && s1["engine"]+s1["flock"]+s1["tcp"]-s0["engine"]-s0["flock"]-s0["tcp"] == 1 &&
			(got.route != routeLane || s1["out"]-s0["out"] >= float64(frame)) {
			break
		}
		require.True(t, time.Now().Before(deadline), "%s %d B: the server never counted the call: %v, then %v", fn.Name, n, s0, s1)
	}
	switch {
	case s1["tcp"] > s0["tcp"]:
		got.serverRoute = routeTCP
	case s1["flock"] > s0["flock"]:
		got.serverRoute, got.server = routeFLOCK, routeFLOCK
	default:
		got.serverRoute = routeLane
		got.server = oneDelta(t, protoCounts(s0), protoCounts(s1), "server "+fn.Name)
	}
	if got.route == routeLane {
		// The sizes are what the rows were picked for: the call frames
		// the lane's server read and wrote (a batch frame holds one more
		// frame header around them).
		require.Equal(t, float64(frame), s1["in"]-s0["in"], "%s: request frame", fn.Name)
		require.Equal(t, float64(frame), s1["out"]-s0["out"], "%s: reply frame", fn.Name)
	}
	return got
}

// frameSize is the lane frame of one message with an empty payload field:
// the frame header and the binary Thrift message.
func frameSize(typ proto.MessageType, name string, body proto.Struct) int {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	b, err := codec.AppendMessage(make([]byte, wire.HeaderSize), proto.Binary, name, typ, 1, body)
	if err != nil {
		panic(err)
	}
	return len(b)
}

// laneSent is what fn's lanes on conn sent, by protocol.
func laneSent(conn *client.Conn, fn string) map[string]float64 {
	out := map[string]float64{}
	for _, st := range conn.LaneStats() {
		if st.Function == fn {
			for p, n := range st.Sent {
				out[p] = float64(n)
			}
		}
	}
	return out
}

// oneDelta is the one key whose count grew by one ("" when none grew).
func oneDelta(t *testing.T, a, b map[string]float64, what string) string {
	t.Helper()
	var grew []string
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			require.Equal(t, 1.0, d, "%s: %s counted %v", what, k, d)
			grew = append(grew, k)
		}
	}
	require.LessOrEqual(t, len(grew), 1, "%s: more than one protocol counted: %v", what, grew)
	if len(grew) == 0 {
		return ""
	}
	return grew[0]
}

// serverCounts reads what the server counted for fn: calls, replies by
// engine protocol ("engine:<protocol>" and their sum "engine"), FLOCK
// replies, TCP calls, and the fast transport's frame bytes in and out.
func serverCounts(t *testing.T, srv *server.Server, fn string) map[string]float64 {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	fast := fastpathtest.Transport()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			lbl := labels(m)
			v := m.GetCounter().GetValue()
			switch mf.GetName() {
			case "hatrpc_server_calls_total":
				if lbl["function"] == fn {
					out["calls"] += v
					if lbl["transport"] == "tcp" {
						out["tcp"] += v
					}
				}
			case "hatrpc_server_engine_messages_total":
				if lbl["function"] == fn {
					out["engine"] += v
					out["engine:"+lbl["protocol"]] += v
				}
			case "hatrpc_server_lane_replies_total":
				if lbl["function"] == fn && lbl["protocol"] == routeFLOCK {
					out["flock"] += v
				}
			case "hatrpc_server_bytes_in_total":
				if lbl["transport"] == fast {
					out["in"] += v
				}
			case "hatrpc_server_bytes_out_total":
				if lbl["transport"] == fast {
					out["out"] += v
				}
			}
		}
	}
	return out
}

func protoCounts(c map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		if p, ok := strings.CutPrefix(k, "engine:"); ok {
			out[p] = v
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// startServer serves every sampled function: each replies with as many
// bytes as its caller asks for (EchoArgs.Mode - 1), so a call's request
// and reply sizes are set apart.
func startServer(t *testing.T, fns []hints.Function) (*server.Server, string) {
	t.Helper()
	srv := server.New(server.WithRDMA(fastpathtest.Provider()), server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	svc := &server.Service{Name: service}
	for i := range fns {
		svc.Methods = append(svc.Methods, server.Method{Name: fns[i].Name, Hints: &fns[i],
			NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
			Handle: func(_ context.Context, args proto.Struct) (proto.Struct, error) {
				s := strings.Repeat("r", max(int(args.(*wiretest.EchoArgs).Mode)-1, 0))
				return &wiretest.EchoResult{Success: &s}, nil
			}})
	}
	srv.Register(svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		select {
		case err := <-served:
			require.ErrorIs(t, err, server.ErrServerClosed)
		case <-time.After(testenv.HangGuard(30 * time.Second)):
			t.Error("Serve did not return")
		}
	})
	return srv, ln.Addr().String()
}
