//go:build cgo && linux

package client_test

import (
	"context"
	"errors"
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
// connection's share) and only counts the rest. A handler answering
// 12-32 times its room costs the server about the room, not the reply:
// the memory allocated during the call (runtime.MemStats.TotalAlloc, the
// handler's result being built beforehand) stays under boundFactor ×
// the room (a buffer grown to a size by appending allocates about five
// times it on the way, 1.25 times at each step), where building the
// reply took about five times the whole reply. The call gets the
// exception naming the reply's exact size (a JSON reply's: "more than"
// the room, its size past the room not counted, proto.JSONCodec), and
// the connection serves the next call.
func TestReplyNotBuiltPastRoom(t *testing.T) {
	const boundFactor = 8
	limits := []struct {
		name  string
		opts  []server.Option
		room  int
		items int // 1 KiB strings in the reply
		text  string
	}{
		{"message-limit", []server.Option{server.WithLimits(replyLimits)}, replyLimit, 32 << 10,
			fmt.Sprintf("exceeds the message limit of %d bytes", replyLimit)},
		{"memory-share", []server.Option{
			server.WithLimits(proto.Limits{MaxMessageSize: 16 << 20, MaxDepth: 16, MaxStringLength: 4 << 20, MaxContainerSize: 1 << 16}),
			server.WithMemoryBudget(1<<20, 0), server.WithFastPathShare(1),
		}, 1 << 20, 12 << 10,
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
				ts.srv.Register(bigService())
				var copts []client.Option
				if rc.json {
					copts = append(copts, client.WithProtocol(proto.JSON))
				}
				c := dial(t, ts.addr, copts...)
				m := &client.Method{Service: "Big", Name: "big", Hints: &hints.Function{Name: "big", Client: rc.set}}
				// Warm up the route (lane attach, buffers), then measure.
				require.Equal(t, 10, bigCall(t, c, m, 10))
				sizes := bigSizes(lc.items)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				errs := make([]error, rc.calls)
				var wg sync.WaitGroup
				for i := range rc.calls {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var res bigResult
						errs[i] = c.Call(tctx(t), m, &wiretest.EchoArgs{DelayNs: int64(lc.items)}, &res)
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
				// The connection goes on, and its 100 KB reply, charged to
				// the budget (on FLOCK until FLOCK posted it), is given back.
				require.Equal(t, 100, bigCall(t, c, m, 100))
				require.Eventually(t, func() bool { return budgetInUse(t, ts) == 0 },
					testenv.HangGuard(5*time.Second), time.Millisecond)
			})
		}
	}
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

// bigService answers big(DelayNs: n) with n strings of 1 KiB, written
// one by one (lists of structs and strings grow a reply that way).
func bigService() *server.Service {
	return &server.Service{Name: "Big", Methods: []server.Method{
		{Name: "big", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
			Handle: func(_ context.Context, a proto.Struct) (proto.Struct, error) {
				n := int(a.(*wiretest.EchoArgs).DelayNs)
				if n > len(bigItems) {
					return nil, errors.New("too many items")
				}
				return &bigResult{items: bigItems[:n]}, nil
			}},
	}}
}

// bigSizes is the reply message's size for n items, as each route's
// name and protocol would make it (encoded whole, once per n).
func bigSizes(n int) []int {
	bigSizesMu.Lock()
	defer bigSizesMu.Unlock()
	if s, ok := bigSizesOf[n]; ok {
		return s
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	var sizes []int
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, name := range []string{"big", "Big:big"} {
			b, err := codec.AppendMessage(nil, p, name, proto.Reply, 1, &bigResult{items: bigItems[:n]})
			if err != nil {
				panic(err)
			}
			sizes = append(sizes, len(b))
		}
	}
	bigSizesOf[n] = sizes
	return sizes
}

var (
	bigSizesMu sync.Mutex
	bigSizesOf = map[int][]int{}
)

func bigCall(t *testing.T, c *client.Conn, m *client.Method, n int) int {
	t.Helper()
	var res bigResult
	require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{DelayNs: int64(n)}, &res))
	return res.n
}

// bigResult: 0: list<string> success (decoded as its count).
type bigResult struct {
	items []string
	n     int
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

type bigReader interface {
	ReadStructBegin() error
	ReadStructEnd() error
	ReadFieldBegin() (proto.Type, int16, error)
	ReadListBegin() (proto.Type, int, error)
	ReadString() (string, error)
	Skip(t proto.Type) error
}

func (r *bigResult) dec(rd bigReader) error {
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
		if id != 0 || t != proto.LIST {
			if err := rd.Skip(t); err != nil {
				return err
			}
			continue
		}
		_, n, err := rd.ReadListBegin()
		if err != nil {
			return err
		}
		for range n {
			if _, err := rd.ReadString(); err != nil {
				return err
			}
		}
		r.n = n
	}
}

func (r *bigResult) EncodeBinary(w *proto.BinaryWriter) error    { return r.enc(w) }
func (r *bigResult) EncodeCompact(w *proto.CompactWriter) error  { return r.enc(w) }
func (r *bigResult) DecodeBinary(rd *proto.BinaryReader) error   { return r.dec(rd) }
func (r *bigResult) DecodeCompact(rd *proto.CompactReader) error { return r.dec(rd) }
