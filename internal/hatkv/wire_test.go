package hatkv

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// TestWireServiceMatchesIDL: the hand-written service description that
// splices stored records serves exactly the IDL's functions, with their
// hints, as the generated one does.
func TestWireServiceMatchesIDL(t *testing.T) {
	svc := wireService((*kvstore.Store)(nil), NewService(nil))
	var got, want []string
	for _, m := range svc.Methods {
		got = append(got, m.Name)
		assert.Same(t, hatkv.HatKVHints.Function(m.Name), m.Hints, m.Name)
		if m.Stream != stream.None {
			assert.NotNil(t, m.HandleStream, m.Name)
			continue
		}
		assert.NotNil(t, m.NewArgs(), m.Name)
	}
	for _, f := range hatkv.HatKVHints.Functions {
		want = append(want, f.Name)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, "HatKV", svc.Name)
}

// TestWireResultEncoding: a wire-form reply decodes, with the generated
// result types, into what the generated reply of the same records would
// carry, in every protocol.
func TestWireResultEncoding(t *testing.T) {
	a := hatkv.Record{"f0": []byte("v0"), "f1": {}, "bin": {0, 1, 2, 0xff}}
	b := hatkv.Record{"x": bytes.Repeat([]byte("y"), 300)}
	wire := func(r hatkv.Record) []byte {
		w, err := kvstore.AppendWire(nil, kvstore.EncodeRecord(kvstore.Record(r)), nil)
		require.NoError(t, err)
		return w
	}
	enc := func(p proto.Protocol, s proto.Struct) []byte {
		b, err := proto.Marshal(p, nil, s)
		require.NoError(t, err)
		return b
	}
	dec := func(p proto.Protocol, buf []byte, s proto.Struct) {
		require.NoError(t, proto.Unmarshal(p, buf, nil, s))
	}
	// JSON: the stored values are binary, so base64; field names text.
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact, proto.JSON} {
		t.Run(p.String(), func(t *testing.T) {
			get := hatkv.NewHatKVGetResult()
			dec(p, enc(p, &wireResult{kind: wireGet, rec: wire(a)}), get)
			assert.Equal(t, a, get.Success)

			mg := hatkv.NewHatKVMultiGetResult()
			dec(p, enc(p, &wireResult{kind: wireMultiGet, lookups: [][]byte{wire(b), nil, wire(a)}}), mg)
			assert.Equal(t, []*hatkv.Lookup{{Found: true, Record: b}, {Found: false, Record: hatkv.Record{}}, {Found: true, Record: a}}, mg.Success)

			sc := hatkv.NewHatKVScanResult()
			dec(p, enc(p, &wireResult{kind: wireScan, scan: []kvstore.WireKV{{Key: "a", Wire: wire(a)}, {Key: "b", Wire: wire(b)}}}), sc)
			assert.Equal(t, []*hatkv.KeyRecord{{Key: "a", Record: a}, {Key: "b", Record: b}}, sc.Success)

			empty := hatkv.NewHatKVScanResult()
			dec(p, enc(p, &wireResult{kind: wireScan, scan: []kvstore.WireKV{}}), empty)
			assert.True(t, empty.IsSetSuccess())
			assert.Empty(t, empty.Success)

			// Byte for byte what the generated code writes for a record
			// of one field (a map of one has one order).
			one := hatkv.Record{"only": []byte("field")}
			gen := hatkv.NewHatKVGetResult()
			gen.Success = one
			assert.Equal(t, enc(p, gen), enc(p, &wireResult{kind: wireGet, rec: wire(one)}))
		})
	}
}

// TestWireRepliesEveryTransport: Get, MultiGet and Scan answered from the
// stored bytes read back the records on TCP (HatRPC framing), on the fast
// path (FLOCK for Get and MultiGet, a lane for Scan), and to plain Thrift
// clients of both protocols; field projection, missing keys and the
// declared exceptions included.
func TestWireRepliesEveryTransport(t *testing.T) {
	ts := startServer(t, "")
	ctx := testCtx(t, 60*time.Second)
	recs := map[string]hatkv.Record{}
	for i := 0; i < 20; i++ {
		k := fmt.Sprintf("k%02d", i)
		recs[k] = hatkv.Record{"a": []byte(k), "b": bytes.Repeat([]byte{byte(i)}, i*50), "c": {}}
		require.NoError(t, ts.kv.Put(ctx, k, recs[k]))
	}
	tcp, err := Dial(ctx, ts.addr, WithClientTransport("tcp"))
	require.NoError(t, err)
	defer closeWithin(t, tcp, 10*time.Second)
	clients := map[string]KV{"fast path": ts.kv, "tcp": tcp.KV()}
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		conn, err := client.Dial(ctx, ts.addr, client.WithoutUpgrade(), client.WithProtocol(p))
		require.NoError(t, err)
		defer conn.Close()
		clients["plain thrift "+p.String()] = hatkv.NewHatKVClient(conn)
	}
	for name, kv := range clients {
		t.Run(name, func(t *testing.T) {
			for k, want := range recs {
				got, err := kv.Get(ctx, k, nil)
				require.NoError(t, err)
				require.Equal(t, want, got, k)
			}
			got, err := kv.Get(ctx, "k07", []string{"c", "a", "nope"})
			require.NoError(t, err)
			assert.Equal(t, hatkv.Record{"a": []byte("k07"), "c": {}}, got)
			_, err = kv.Get(ctx, "absent", nil)
			var nf *hatkv.NotFound
			require.ErrorAs(t, err, &nf)
			assert.Equal(t, "absent", nf.Key)
			_, err = kv.Get(ctx, "", nil)
			var bad *hatkv.InvalidArgument
			require.ErrorAs(t, err, &bad)

			mg, err := kv.MultiGet(ctx, []string{"k03", "absent", "k19"}, []string{"b"})
			require.NoError(t, err)
			assert.Equal(t, []*hatkv.Lookup{
				{Found: true, Record: hatkv.Record{"b": recs["k03"]["b"]}},
				{Found: false, Record: hatkv.Record{}},
				{Found: true, Record: hatkv.Record{"b": recs["k19"]["b"]}},
			}, mg)
			_, err = kv.MultiGet(ctx, []string{"k01", ""}, nil)
			require.ErrorAs(t, err, &bad)

			sc, err := kv.Scan(ctx, "k17", 10, nil)
			require.NoError(t, err)
			var keys []string
			for _, kr := range sc {
				keys = append(keys, kr.Key)
				assert.Equal(t, recs[kr.Key], kr.Record, kr.Key)
			}
			assert.Equal(t, []string{"k17", "k18", "k19"}, keys)
			_, err = kv.Scan(ctx, "", 0, nil)
			require.ErrorAs(t, err, &bad)
		})
	}
	lanes := laneRequests(ts.client)
	for _, fn := range []string{"HatKV:Get", "HatKV:MultiGet", "HatKV:Scan"} {
		assert.Positive(t, lanes[fn], "%s did not take the fast path (%v)", fn, lanes)
	}
	assert.Empty(t, laneRequests(tcp), "the tcp client stays on TCP")
}
