package proto_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

var protocols = []proto.Protocol{proto.Binary, proto.Compact}

func apacheProto(p proto.Protocol, buf *thrift.TMemoryBuffer) thrift.TProtocol {
	cfg := &thrift.TConfiguration{}
	if p == proto.Binary {
		return thrift.NewTBinaryProtocolConf(buf, cfg)
	}
	return thrift.NewTCompactProtocolConf(buf, cfg)
}

// normalize maps empty byte slices to nil: the two libraries disagree on
// nil versus empty, which is not a wire difference.
func normalize(s *AllTypes) *AllTypes {
	if len(s.Bin) == 0 {
		s.Bin = nil
	}
	for _, l := range s.MB {
		for i := range l {
			if len(l[i]) == 0 {
				l[i] = nil
			}
		}
	}
	return s
}

func TestCrossStructRandom(t *testing.T) {
	const seeds = 400
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			for seed := uint64(0); seed < seeds; seed++ {
				want := randAll(rand.New(rand.NewPCG(seed, 7)))

				ours, err := proto.Marshal(p, nil, want)
				require.NoError(t, err)

				mb := thrift.NewTMemoryBuffer()
				require.NoError(t, apAllWrite(ctx, apacheProto(p, mb), want))
				theirs := append([]byte(nil), mb.Bytes()...)
				require.Equal(t, theirs, ours, "seed %d: encodings differ", seed)

				// ours -> Apache
				mb = thrift.NewTMemoryBuffer()
				_, _ = mb.Write(ours)
				var gotA AllTypes
				require.NoError(t, apAllRead(ctx, apacheProto(p, mb), &gotA), "seed %d", seed)
				require.Equal(t, normalize(want), normalize(&gotA), "seed %d", seed)

				// Apache -> ours, copying and aliasing
				var got AllTypes
				require.NoError(t, proto.Unmarshal(p, theirs, nil, &got), "seed %d", seed)
				require.Equal(t, normalize(want), normalize(&got), "seed %d", seed)

				// skipping every field consumes exactly the struct
				var g Generic
				require.NoError(t, proto.Unmarshal(p, theirs, nil, &g))
				require.Equal(t, 19, g.Fields)
			}
		})
	}
}

// TestCrossSkipNested makes Apache write a struct our decoder does not know
// (it is read as Generic) and checks Skip lands on the following field.
func TestCrossSkipUnknownFields(t *testing.T) {
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			want := randAll(rand.New(rand.NewPCG(99, 1)))
			mb := thrift.NewTMemoryBuffer()
			ap := apacheProto(p, mb)
			// struct Wrapper { 1: AllTypes unknown, 2: Nested known }
			require.NoError(t, ap.WriteStructBegin(ctx, "Wrapper"))
			require.NoError(t, ap.WriteFieldBegin(ctx, "x", thrift.STRUCT, 1))
			require.NoError(t, apAllWrite(ctx, ap, want))
			require.NoError(t, ap.WriteFieldBegin(ctx, "n", thrift.STRUCT, 2))
			require.NoError(t, apNestedWrite(ctx, ap, &want.N))
			require.NoError(t, ap.WriteFieldStop(ctx))
			require.NoError(t, ap.WriteStructEnd(ctx))
			require.NoError(t, ap.Flush(ctx))

			var got wrapper
			require.NoError(t, proto.Unmarshal(p, mb.Bytes(), nil, &got))
			require.Equal(t, want.N, got.N)
		})
	}
}

// wrapper knows only field 2 of the struct written above.
type wrapper struct{ N Nested }

func (w *wrapper) EncodeBinary(bw *proto.BinaryWriter) error   { encWrapper(bw, w); return nil }
func (w *wrapper) EncodeCompact(cw *proto.CompactWriter) error { encWrapper(cw, w); return nil }

func encWrapper[W writer](w W, x *wrapper) {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.STRUCT, 2)
	encNested(w, &x.N)
	w.WriteFieldStop()
	w.WriteStructEnd()
}
func (w *wrapper) DecodeBinary(r *proto.BinaryReader) error { return decWrapper(r, w) }
func (w *wrapper) DecodeCompact(r *proto.CompactReader) error {
	return decWrapper(r, w)
}

func decWrapper[R reader](r R, w *wrapper) error {
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == proto.STOP {
			return r.ReadStructEnd()
		}
		if id == 2 && t == proto.STRUCT {
			err = decNested(r, &w.N)
		} else {
			err = r.Skip(t)
		}
		if err != nil {
			return err
		}
	}
}

type emptyStruct struct{}

func (emptyStruct) EncodeBinary(w *proto.BinaryWriter) error   { w.WriteFieldStop(); return nil }
func (emptyStruct) EncodeCompact(w *proto.CompactWriter) error { w.WriteFieldStop(); return nil }
func (emptyStruct) DecodeBinary(r *proto.BinaryReader) error   { return r.Skip(proto.STRUCT) }
func (emptyStruct) DecodeCompact(r *proto.CompactReader) error { return r.Skip(proto.STRUCT) }

func TestCrossMessageHeader(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		typ   proto.MessageType
		seqid int32
	}{
		{"add", proto.Call, 0},
		{"", proto.Reply, 1},
		{"get_with_a_rather_long_method_name_over_127_bytes_" + string(make([]byte, 100)), proto.Exception, -1},
		{"ping", proto.Oneway, 2147483647},
		{"x", proto.Call, -2147483648},
		{"y", proto.Reply, 300},
	}
	for _, p := range protocols {
		for _, tc := range cases {
			t.Run(p.String()+"/"+tc.typ.String(), func(t *testing.T) {
				ours, err := proto.EncodeMessage(p, nil, tc.name, tc.typ, tc.seqid, emptyStruct{})
				require.NoError(t, err)

				mb := thrift.NewTMemoryBuffer()
				ap := apacheProto(p, mb)
				require.NoError(t, ap.WriteMessageBegin(ctx, tc.name, thrift.TMessageType(tc.typ), tc.seqid))
				require.NoError(t, ap.WriteStructBegin(ctx, "E"))
				require.NoError(t, ap.WriteFieldStop(ctx))
				require.NoError(t, ap.WriteStructEnd(ctx))
				require.NoError(t, ap.WriteMessageEnd(ctx))
				require.NoError(t, ap.Flush(ctx))
				require.Equal(t, mb.Bytes(), ours)

				h, off, err := proto.DecodeMessageHeader(p, ours, nil)
				require.NoError(t, err)
				require.Equal(t, proto.MessageHeader{Name: tc.name, Type: tc.typ, SeqID: tc.seqid}, h)
				require.Equal(t, len(ours)-1, off)

				mb = thrift.NewTMemoryBuffer()
				_, _ = mb.Write(ours)
				name, typ, seq, err := apacheProto(p, mb).ReadMessageBegin(ctx)
				require.NoError(t, err)
				require.Equal(t, tc.name, name)
				require.Equal(t, thrift.TMessageType(tc.typ), typ)
				require.Equal(t, tc.seqid, seq)
			})
		}
	}
}

func TestCrossNonStrictBinaryHeader(t *testing.T) {
	ctx := context.Background()
	f := false
	mb := thrift.NewTMemoryBuffer()
	ap := thrift.NewTBinaryProtocolConf(mb, &thrift.TConfiguration{TBinaryStrictWrite: &f})
	require.NoError(t, ap.WriteMessageBegin(ctx, "legacy", thrift.CALL, 42))
	require.NoError(t, ap.WriteStructBegin(ctx, "E"))
	require.NoError(t, ap.WriteFieldStop(ctx))
	require.NoError(t, ap.WriteStructEnd(ctx))
	require.NoError(t, ap.Flush(ctx))
	msg := mb.Bytes()
	require.Equal(t, byte(0), msg[0], "Apache wrote a non-strict header")

	h, err := proto.DecodeMessage(proto.Binary, msg, nil, emptyStruct{})
	require.NoError(t, err)
	require.Equal(t, proto.MessageHeader{Name: "legacy", Type: proto.Call, SeqID: 42}, h)

}

func TestCrossApplicationException(t *testing.T) {
	ctx := context.Background()
	cases := []proto.ApplicationException{
		{Type: proto.ExcUnknownMethod, Message: "no such method: frob"},
		{Type: proto.ExcInternalError, Message: ""},
		{Type: proto.ExcUnsupportedClientType, Message: "x"},
		{Type: 77, Message: "custom"},
	}
	for _, p := range protocols {
		for _, exc := range cases {
			t.Run(p.String(), func(t *testing.T) {
				ours, err := proto.EncodeMessage(p, nil, "m", proto.Exception, 9, &exc)
				require.NoError(t, err)

				mb := thrift.NewTMemoryBuffer()
				ap := apacheProto(p, mb)
				require.NoError(t, ap.WriteMessageBegin(ctx, "m", thrift.EXCEPTION, 9))
				ae := thrift.NewTApplicationException(exc.Type, exc.Message)
				require.NoError(t, ae.Write(ctx, ap))
				require.NoError(t, ap.WriteMessageEnd(ctx))
				require.NoError(t, ap.Flush(ctx))
				require.Equal(t, mb.Bytes(), ours)

				// Apache reads ours
				mb = thrift.NewTMemoryBuffer()
				_, _ = mb.Write(ours)
				ap = apacheProto(p, mb)
				_, typ, _, err := ap.ReadMessageBegin(ctx)
				require.NoError(t, err)
				require.Equal(t, thrift.EXCEPTION, typ)
				got := thrift.NewTApplicationException(0, "")
				require.NoError(t, got.Read(ctx, ap))
				require.Equal(t, exc.Type, got.TypeId())
				require.Equal(t, ae.Error(), got.Error())

				// we read Apache's
				var back proto.ApplicationException
				h, err := proto.DecodeMessage(p, ours, nil, &back)
				require.NoError(t, err)
				require.Equal(t, proto.Exception, h.Type)
				require.Equal(t, exc.Type, back.Type)
				require.Equal(t, ae.Error(), back.Message)
			})
		}
	}
}
