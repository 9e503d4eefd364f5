//go:build cgo && linux

package client_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A reply that cannot be sent is not built: the server's encoder keeps
// at most the room the reply can have (the message limit, the
// connection's share) and only counts the rest. A handler answering 12-32
// times its room costs the server about the room, not the reply: the
// memory allocated during the call (runtime.MemStats.TotalAlloc, the
// handler's result being built beforehand or computed as it is written)
// stays under boundFactor × the room (a buffer grown to a size by
// appending allocates about five times it on the way), where building
// the reply took about five times the whole reply (32 MiB of strings or
// of i64s: 201 MB). The results are 1 KiB strings and values written one
// by one, as generated code writes lists of enums and typedefs and every
// map (i64s, enums, i32-to-double entries), whose writers each drop what
// passed the room. The call gets the exception naming the reply's exact
// size (a JSON reply's: "more than" the room, its size past the room not
// counted, proto.JSONCodec), and the connection serves the next call.
func TestReplyNotBuiltPastRoom(t *testing.T) {
	const boundFactor = 8
	limits := []struct {
		name   string
		opts   []server.Option
		room   int
		factor int // the reply is factor times the room
		text   string
	}{
		{"message-limit", []server.Option{server.WithLimits(replyLimits)}, replyLimit, 32,
			fmt.Sprintf("exceeds the message limit of %d bytes", replyLimit)},
		{"memory-share", []server.Option{
			server.WithLimits(proto.Limits{MaxMessageSize: 16 << 20, MaxDepth: 16, MaxStringLength: 4 << 20, MaxContainerSize: 1 << 16}),
			server.WithMemoryBudget(1<<20, 0), server.WithFastPathShare(1),
		}, 1 << 20, 12, // within the message limit
			"exceeds the connection's memory share of 1048576 bytes (WithMemoryBudget)"},
	}
	routes := []struct {
		name  string
		lanes bool
		set   hints.Set
		calls int // at once
		json  bool
	}{
		{"tcp", false, hints.Set{}, 1, false},
		{"tcp-json", false, hints.Set{}, 1, true}, // plain Thrift, TJSONProtocol
		{"lane", true, hints.Set{}, 1, false},
		{"lane-rfp", true, hints.Set{Protocol: hints.ProtoRFP}, 1, false},
		{"batch", true, hints.Set{Protocol: hints.ProtoRFP, Batch: 4, BatchTimeout: 50 * time.Millisecond}, 4, false},
		{"flock", true, hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64}, 1, false},
	}
	for _, lc := range limits {
		for _, rc := range routes {
			t.Run(lc.name+"/"+rc.name, func(t *testing.T) {
				var ts *testServer
				if rc.lanes {
					ts = laneServer(t, lc.opts...)
				} else {
					ts = serve(t, "", lc.opts...)
				}
				ts.srv.Register(shapeService())
				var copts []client.Option
				if rc.json {
					copts = append(copts, client.WithProtocol(proto.JSON))
				}
				c := dial(t, ts.addr, copts...)
				m := &client.Method{Service: "Big", Name: "big", Hints: &hints.Function{Name: "big", Client: rc.set}}
				for _, sh := range shapes {
					t.Run(sh.name, func(t *testing.T) {
						// Warm up the route (lane attach, buffers), then measure.
						require.Equal(t, 10, shapeCall(t, c, m, sh.name, 10))
						items := lc.factor * lc.room / sh.each
						sizes := replySizes(sh.name, items)
						var before, after runtime.MemStats
						runtime.GC()
						runtime.ReadMemStats(&before)
						errs := make([]error, rc.calls)
						var wg sync.WaitGroup
						for i := range rc.calls {
							wg.Add(1)
							go func() {
								defer wg.Done()
								var res scalarResult
								errs[i] = c.Call(countCtx(t), m, &wiretest.EchoArgs{Msg: sh.name, DelayNs: int64(items)}, &res)
							}()
						}
						wg.Wait()
						runtime.ReadMemStats(&after)
						alloc := after.TotalAlloc - before.TotalAlloc
						t.Logf("reply of %d bytes, room %d: %d bytes allocated during %d call(s)", sizes[0], lc.room, alloc, rc.calls)
						require.Less(t, alloc, uint64(boundFactor*lc.room*rc.calls))
						more := ""
						if rc.json {
							more = "more than "
						}
						want := regexp.MustCompile(`^hatrpc: reply of ` + more + `([0-9]+) bytes ` + regexp.QuoteMeta(lc.text) + `$`)
						for _, err := range errs {
							var ae *proto.ApplicationException
							require.ErrorAs(t, err, &ae)
							require.Equal(t, proto.ExcInternalError, ae.Type)
							got := want.FindStringSubmatch(ae.Message)
							require.NotNil(t, got, ae.Message)
							n, _ := strconv.Atoi(got[1])
							if rc.json {
								require.Equal(t, lc.room, n, "a JSON reply past its room: more than the room")
							} else {
								require.Contains(t, sizes, n, "the reply's exact size")
							}
						}
						// The connection goes on, and its 100 KB reply, charged
						// to the budget (on FLOCK until FLOCK posted it), is
						// given back.
						n := 100 << 10 / sh.each
						require.Equal(t, n, shapeCall(t, c, m, sh.name, n))
						require.Eventually(t, func() bool { return budgetInUse(t, ts) == 0 },
							testenv.HangGuard(5*time.Second), time.Millisecond)
					})
				}
			})
		}
	}
}

// countCtx guards a call or a stream that counts 12-32 MiB of values
// past its room: seconds under the race detector on a loaded host (a
// batch counts four at once), more than tctx's guard allows.
func countCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	t.Cleanup(cancel)
	return ctx
}

// budgetInUse is the server's hatrpc_server_request_memory_bytes.
func budgetInUse(t *testing.T, ts *testServer) float64 {
	t.Helper()
	mfs, err := ts.srv.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "hatrpc_server_request_memory_bytes" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no hatrpc_server_request_memory_bytes")
	return 0
}

// shapes are the results TestReplyNotBuiltPastRoom and
// TestStreamMsgNotBuiltPastLimit send: 1 KiB strings (bigResult), and
// values written one by one (scalarResult).
var shapes = []struct {
	name string
	each int // bytes a value takes in binary, about
}{
	{"strings", 1 << 10},
	{"i64-list", 8},
	{"enum-list", 4},
	{"map-i32-double", 12},
}

// bigItems backs every bigResult: one 1 KiB string, so a handler's
// result costs only its slice of headers, built before the call.
var bigItems = func() []string {
	v := make([]string, 32<<10)
	s := strings.Repeat("k", 1<<10)
	for i := range v {
		v[i] = s
	}
	return v
}()

// shapeMsg is n values of shape: 1 KiB strings (bigResult, at most
// len(bigItems)) or scalars computed as they are written (scalarResult);
// either decodes as a scalarResult, its count.
func shapeMsg(shape string, n int) proto.Struct {
	if shape == "strings" {
		return &bigResult{items: bigItems[:min(n, len(bigItems))]}
	}
	return &scalarResult{shape: shape, n: n}
}

// shapeService answers big(Msg: shape, DelayNs: n) with n values of the
// shape (shapeMsg).
func shapeService() *server.Service {
	return &server.Service{Name: "Big", Methods: []server.Method{
		{Name: "big", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
			Handle: func(_ context.Context, a proto.Struct) (proto.Struct, error) {
				args := a.(*wiretest.EchoArgs)
				return shapeMsg(args.Msg, int(args.DelayNs)), nil
			}},
	}}
}

// replySizes is the reply message's size for n values of shape, as each
// route's name and protocol would make it (encoded whole, once per shape
// and n).
func replySizes(shape string, n int) []int {
	replySizesMu.Lock()
	defer replySizesMu.Unlock()
	key := fmt.Sprint(shape, n)
	if s, ok := replySizesOf[key]; ok {
		return s
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	var sizes []int
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, name := range []string{"big", "Big:big"} {
			b, err := codec.AppendMessage(nil, p, name, proto.Reply, 1, shapeMsg(shape, n))
			if err != nil {
				panic(err)
			}
			sizes = append(sizes, len(b))
		}
	}
	replySizesOf[key] = sizes
	return sizes
}

var (
	replySizesMu sync.Mutex
	replySizesOf = map[string][]int{}
)

func shapeCall(t *testing.T, c *client.Conn, m *client.Method, shape string, n int) int {
	t.Helper()
	var res scalarResult
	require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: shape, DelayNs: int64(n)}, &res))
	return res.n
}

// bigResult: 0: list<string> success, encoded only (a scalarResult
// decodes it).
type bigResult struct {
	items []string
}

type bigWriter interface {
	WriteStructBegin()
	WriteStructEnd()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteListBegin(elem proto.Type, n int)
	WriteString(v string)
}

func (r *bigResult) enc(w bigWriter) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.LIST, 0)
	w.WriteListBegin(proto.STRING, len(r.items))
	for _, s := range r.items {
		w.WriteString(s)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (r *bigResult) EncodeBinary(w *proto.BinaryWriter) error   { return r.enc(w) }
func (r *bigResult) EncodeCompact(w *proto.CompactWriter) error { return r.enc(w) }
func (r *bigResult) DecodeBinary(rd *proto.BinaryReader) error  { return rd.Skip(proto.STRUCT) }
func (r *bigResult) DecodeCompact(rd *proto.CompactReader) error {
	return rd.Skip(proto.STRUCT)
}

// scalarResult: 0: list<i64>, list<enum> or map<i32, double> success,
// decoded as its count (of any list or map: a bigResult's strings too).
type scalarResult struct {
	shape string
	n     int
}

type scalarWriter interface {
	WriteStructBegin()
	WriteStructEnd()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteListBegin(elem proto.Type, n int)
	WriteMapBegin(key, val proto.Type, n int)
	WriteI32(v int32)
	WriteI64(v int64)
	WriteDouble(v float64)
}

func (r *scalarResult) enc(w scalarWriter) error {
	w.WriteStructBegin()
	switch r.shape {
	case "i64-list":
		w.WriteFieldBegin(proto.LIST, 0)
		w.WriteListBegin(proto.I64, r.n)
		for i := range r.n {
			w.WriteI64(int64(i) << 33)
		}
	case "enum-list":
		w.WriteFieldBegin(proto.LIST, 0)
		w.WriteListBegin(proto.I32, r.n)
		for i := range r.n {
			w.WriteI32(int32(i%5) + 1<<20)
		}
	case "map-i32-double":
		w.WriteFieldBegin(proto.MAP, 0)
		w.WriteMapBegin(proto.I32, proto.DOUBLE, r.n)
		for i := range r.n {
			w.WriteI32(int32(i))
			w.WriteDouble(float64(i) / 7)
		}
	default:
		return fmt.Errorf("no shape %q", r.shape)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

type scalarReader interface {
	ReadStructBegin() error
	ReadStructEnd() error
	ReadFieldBegin() (proto.Type, int16, error)
	ReadListBegin() (proto.Type, int, error)
	ReadMapBegin() (proto.Type, proto.Type, int, error)
	Skip(t proto.Type) error
}

func (r *scalarResult) dec(rd scalarReader) error {
	if err := rd.ReadStructBegin(); err != nil {
		return err
	}
	for {
		t, id, err := rd.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == proto.STOP {
			return rd.ReadStructEnd()
		}
		if id != 0 || (t != proto.LIST && t != proto.MAP) {
			if err := rd.Skip(t); err != nil {
				return err
			}
			continue
		}
		var types []proto.Type
		if t == proto.LIST {
			et, n, err := rd.ReadListBegin()
			if err != nil {
				return err
			}
			r.n, types = n, []proto.Type{et}
		} else {
			kt, vt, n, err := rd.ReadMapBegin()
			if err != nil {
				return err
			}
			r.n, types = n, []proto.Type{kt, vt}
		}
		for range r.n {
			for _, et := range types {
				if err := rd.Skip(et); err != nil {
					return err
				}
			}
		}
	}
}

func (r *scalarResult) EncodeBinary(w *proto.BinaryWriter) error    { return r.enc(w) }
func (r *scalarResult) EncodeCompact(w *proto.CompactWriter) error  { return r.enc(w) }
func (r *scalarResult) DecodeBinary(rd *proto.BinaryReader) error   { return r.dec(rd) }
func (r *scalarResult) DecodeCompact(rd *proto.CompactReader) error { return r.dec(rd) }
