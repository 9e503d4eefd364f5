//go:build cgo && linux

package client_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
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

// TestReplyNotBuiltPastRoom with results written value by value, as
// generated code writes lists of enums and typedefs and every map: 32
// times the message limit of i64s, enums (i32) or i32 to double entries
// costs the server about the room (32 MiB of i64s allocated 201 MB
// before: the values were appended until the struct's end), the call
// gets the exception naming the reply's exact size, and the connection
// serves the next call.
func TestScalarReplyNotBuiltPastRoom(t *testing.T) {
	const boundFactor = 8
	shapes := []struct {
		name string
		each int // bytes a value takes in binary
	}{
		{"i64-list", 8},
		{"enum-list", 4},
		{"map-i32-double", 12},
	}
	routes := []struct {
		name  string
		lanes bool
		set   hints.Set
		json  bool
	}{
		{"tcp", false, hints.Set{}, false},
		{"tcp-json", false, hints.Set{}, true},
		{"lane", true, hints.Set{}, false},
		{"batch", true, hints.Set{Protocol: hints.ProtoRFP, Batch: 4, BatchTimeout: 50 * time.Millisecond}, false},
	}
	text := fmt.Sprintf("exceeds the message limit of %d bytes", replyLimit)
	for _, rc := range routes {
		t.Run(rc.name, func(t *testing.T) {
			opt := server.WithLimits(replyLimits)
			var ts *testServer
			if rc.lanes {
				ts = laneServer(t, opt)
			} else {
				ts = serve(t, "", opt)
			}
			ts.srv.Register(scalarService())
			var copts []client.Option
			if rc.json {
				copts = append(copts, client.WithProtocol(proto.JSON))
			}
			c := dial(t, ts.addr, copts...)
			m := &client.Method{Service: "Scalars", Name: "scalars", Hints: &hints.Function{Name: "scalars", Client: rc.set}}
			for _, sh := range shapes {
				t.Run(sh.name, func(t *testing.T) {
					require.Equal(t, 10, scalarCall(t, c, m, sh.name, 10)) // warm the route up
					items := 32 * replyLimit / sh.each
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					var res scalarResult
					err := c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: sh.name, DelayNs: int64(items)}, &res)
					runtime.ReadMemStats(&after)
					alloc := after.TotalAlloc - before.TotalAlloc
					sizes := scalarSizes(sh.name, items)
					t.Logf("reply of %d bytes, room %d: %d bytes allocated", sizes[0], replyLimit, alloc)
					require.Less(t, alloc, uint64(boundFactor*replyLimit))
					more := ""
					if rc.json {
						more = "more than "
					}
					want := regexp.MustCompile(`^hatrpc: reply of ` + more + `([0-9]+) bytes ` + regexp.QuoteMeta(text) + `$`)
					var ae *proto.ApplicationException
					require.ErrorAs(t, err, &ae)
					require.Equal(t, proto.ExcInternalError, ae.Type)
					got := want.FindStringSubmatch(ae.Message)
					require.NotNil(t, got, ae.Message)
					n, _ := strconv.Atoi(got[1])
					if rc.json {
						require.Equal(t, replyLimit, n, "a JSON reply past its room: more than the room")
					} else {
						require.Contains(t, sizes, n, "the reply's exact size")
					}
					require.Equal(t, 1000, scalarCall(t, c, m, sh.name, 1000))
					require.Eventually(t, func() bool { return budgetInUse(t, ts) == 0 },
						testenv.HangGuard(5*time.Second), time.Millisecond)
				})
			}
		})
	}
}

// scalarService answers scalars(Msg: shape, DelayNs: n) with n values of
// the shape, computed as they are written (the result costs nothing).
func scalarService() *server.Service {
	return &server.Service{Name: "Scalars", Methods: []server.Method{
		{Name: "scalars", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
			Handle: func(_ context.Context, a proto.Struct) (proto.Struct, error) {
				args := a.(*wiretest.EchoArgs)
				return &scalarResult{shape: args.Msg, n: int(args.DelayNs)}, nil
			}},
	}}
}

func scalarCall(t *testing.T, c *client.Conn, m *client.Method, shape string, n int) int {
	t.Helper()
	var res scalarResult
	require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: shape, DelayNs: int64(n)}, &res))
	return res.n
}

// scalarSizes is the reply message's size for n values of shape, with
// each name a route gives the method, in binary and compact.
func scalarSizes(shape string, n int) []int {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	var sizes []int
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, name := range []string{"scalars", "Scalars:scalars"} {
			b, err := codec.AppendMessage(nil, p, name, proto.Reply, 1, &scalarResult{shape: shape, n: n})
			if err != nil {
				panic(err)
			}
			sizes = append(sizes, len(b))
		}
	}
	return sizes
}

// scalarResult: 0: list<i64>, list<enum> or map<i32, double> success,
// decoded as its count.
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
