package proto_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// tv is a Thrift value of any type, written the same way by our binary
// writer and by an Apache TProtocol, so random trees can put every type
// everywhere (map keys of every scalar type, containers of containers).
// A STRING with bin set is a binary value.
type tv struct {
	t      proto.Type
	bin    bool
	i      int64 // bool, i8..i64
	d      float64
	s      []byte // string or binary
	u      [16]byte
	elems  []tv // list, set; a map's keys and values alternate
	et, vt proto.Type
	ids    []int16 // a struct's field ids, one per elem
}

var scalarTypes = []proto.Type{proto.BOOL, proto.I8, proto.I16, proto.I32, proto.I64, proto.DOUBLE, proto.STRING, proto.UUID}

// treeStrings are the strings TJSONProtocol quoting must get right.
var treeStrings = []string{"", "plain", `"quoted" \back\ /slash/`, "<a href='x'>&amp;</a>", "tab\tnl\ncr\rbs\bff\f\x00\x01\x1f\x7f",
	"héllo wörld ✓", "emoji 😀 𝄞", "line\u2028para\u2029", "\ufffd", "日本語"}

func randScalar(rng *rand.Rand, t proto.Type, bin bool) tv {
	v := tv{t: t, bin: bin}
	switch t {
	case proto.BOOL:
		v.i = int64(rng.IntN(2))
	case proto.I8:
		v.i = randInt(rng, 8)
	case proto.I16:
		v.i = randInt(rng, 16)
	case proto.I32:
		v.i = randInt(rng, 32)
	case proto.I64:
		v.i = randInt(rng, 64)
	case proto.DOUBLE:
		v.d = []float64{0, math.Copysign(0, -1), 1.5, -2.25e-300, 1e21, 1e20, 1e-7, 123456789.125,
			math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN(), randFloat(rng)}[rng.IntN(14)]
	case proto.STRING:
		if bin {
			v.s = randBytes(rng, 7)
		} else {
			v.s = []byte(treeStrings[rng.IntN(len(treeStrings))])
		}
	case proto.UUID:
		copy(v.u[:], randBytes(rng, 16))
	}
	return v
}

// randTree returns a value of a random type; depth bounds nesting.
func randTree(rng *rand.Rand, depth int) tv {
	k := rng.IntN(13)
	if depth <= 0 {
		k %= 9
	}
	switch {
	case k < 8:
		return randScalar(rng, scalarTypes[k], false)
	case k == 8:
		return randScalar(rng, proto.STRING, true)
	case k == 9:
		return randStruct(rng, depth-1)
	}
	v := tv{t: []proto.Type{proto.LIST, proto.SET, proto.MAP}[k-10]}
	shape := randTree(rng, depth-1)
	v.et = shape.t
	n := rng.IntN(4)
	if v.t == proto.MAP { // scalar keys
		kt := rng.IntN(9)
		kbin := kt == 8
		v.et = scalarTypes[kt%8]
		if kbin {
			v.et = proto.STRING
		}
		v.vt = shape.t
		for range n {
			v.elems = append(v.elems, randScalar(rng, v.et, kbin), like(rng, shape, depth-1))
		}
		return v
	}
	for range n {
		v.elems = append(v.elems, like(rng, shape, depth-1))
	}
	return v
}

// like returns a fresh value of shape's type (and binary-ness), so a
// container's elements agree.
func like(rng *rand.Rand, shape tv, depth int) tv {
	if shape.t < proto.STRUCT || shape.t == proto.UUID {
		return randScalar(rng, shape.t, shape.bin)
	}
	for {
		v := randTree(rng, depth)
		if v.t == shape.t {
			return v
		}
		if depth <= 0 {
			return shape
		}
	}
}

func randStruct(rng *rand.Rand, depth int) tv {
	v := tv{t: proto.STRUCT}
	for i := range rng.IntN(5) {
		v.ids = append(v.ids, int16(i*7-3))
		v.elems = append(v.elems, randTree(rng, depth))
	}
	return v
}

func (v *tv) write(w *proto.BinaryWriter) {
	switch v.t {
	case proto.BOOL:
		w.WriteBool(v.i != 0)
	case proto.I8:
		w.WriteI8(int8(v.i))
	case proto.I16:
		w.WriteI16(int16(v.i))
	case proto.I32:
		w.WriteI32(int32(v.i))
	case proto.I64:
		w.WriteI64(v.i)
	case proto.DOUBLE:
		w.WriteDouble(v.d)
	case proto.STRING:
		if v.bin {
			w.WriteBinary(v.s)
		} else {
			w.WriteString(string(v.s))
		}
	case proto.UUID:
		w.WriteUUID(v.u)
	case proto.STRUCT:
		for i := range v.elems {
			w.WriteFieldBegin(v.elems[i].t, v.ids[i])
			v.elems[i].write(w)
		}
		w.WriteFieldStop()
	case proto.LIST, proto.SET:
		w.WriteListBegin(v.et, len(v.elems))
		for i := range v.elems {
			v.elems[i].write(w)
		}
	case proto.MAP:
		w.WriteMapBegin(v.et, v.vt, len(v.elems)/2)
		for i := range v.elems {
			v.elems[i].write(w)
		}
	}
}

func (v *tv) apWrite(ctx context.Context, p thrift.TProtocol) error {
	var err error
	switch v.t {
	case proto.BOOL:
		err = p.WriteBool(ctx, v.i != 0)
	case proto.I8:
		err = p.WriteByte(ctx, int8(v.i))
	case proto.I16:
		err = p.WriteI16(ctx, int16(v.i))
	case proto.I32:
		err = p.WriteI32(ctx, int32(v.i))
	case proto.I64:
		err = p.WriteI64(ctx, v.i)
	case proto.DOUBLE:
		err = p.WriteDouble(ctx, v.d)
	case proto.STRING:
		if v.bin {
			err = p.WriteBinary(ctx, v.s)
		} else {
			err = p.WriteString(ctx, string(v.s))
		}
	case proto.UUID:
		err = p.WriteUUID(ctx, thrift.Tuuid(v.u))
	case proto.STRUCT:
		err = p.WriteStructBegin(ctx, "S")
		for i := range v.elems {
			err = errors.Join(err, p.WriteFieldBegin(ctx, "f", thrift.TType(v.elems[i].t), v.ids[i]),
				v.elems[i].apWrite(ctx, p), p.WriteFieldEnd(ctx))
		}
		err = errors.Join(err, p.WriteFieldStop(ctx), p.WriteStructEnd(ctx))
	case proto.LIST, proto.SET:
		if v.t == proto.LIST {
			err = p.WriteListBegin(ctx, thrift.TType(v.et), len(v.elems))
		} else {
			err = p.WriteSetBegin(ctx, thrift.TType(v.et), len(v.elems))
		}
		for i := range v.elems {
			err = errors.Join(err, v.elems[i].apWrite(ctx, p))
		}
		if v.t == proto.LIST {
			err = errors.Join(err, p.WriteListEnd(ctx))
		} else {
			err = errors.Join(err, p.WriteSetEnd(ctx))
		}
	case proto.MAP:
		err = p.WriteMapBegin(ctx, thrift.TType(v.et), thrift.TType(v.vt), len(v.elems)/2)
		for i := range v.elems {
			err = errors.Join(err, v.elems[i].apWrite(ctx, p))
		}
		err = errors.Join(err, p.WriteMapEnd(ctx))
	}
	return err
}

// read decodes a value shaped like v (which says where binary values are)
// and returns it.
func (v *tv) read(r *proto.BinaryReader) (tv, error) {
	got := tv{t: v.t, bin: v.bin, et: v.et, vt: v.vt, ids: v.ids}
	var err error
	switch v.t {
	case proto.BOOL:
		var b bool
		b, err = r.ReadBool()
		if b {
			got.i = 1
		}
	case proto.I8:
		var x int8
		x, err = r.ReadI8()
		got.i = int64(x)
	case proto.I16:
		var x int16
		x, err = r.ReadI16()
		got.i = int64(x)
	case proto.I32:
		var x int32
		x, err = r.ReadI32()
		got.i = int64(x)
	case proto.I64:
		got.i, err = r.ReadI64()
	case proto.DOUBLE:
		got.d, err = r.ReadDouble()
	case proto.STRING:
		if v.bin {
			got.s, err = r.ReadBinary()
		} else {
			var s string
			s, err = r.ReadString()
			got.s = []byte(s)
		}
	case proto.UUID:
		got.u, err = r.ReadUUID()
	case proto.STRUCT:
		if err := r.ReadStructBegin(); err != nil {
			return got, err
		}
		for i := range v.elems {
			t, id, ferr := r.ReadFieldBegin()
			if ferr != nil || t != v.elems[i].t || id != v.ids[i] {
				return got, errors.Join(ferr, errors.New("field mismatch"))
			}
			e, ferr := v.elems[i].read(r)
			if ferr != nil {
				return got, ferr
			}
			got.elems = append(got.elems, e)
		}
		if t, _, ferr := r.ReadFieldBegin(); ferr != nil || t != proto.STOP {
			return got, errors.Join(ferr, errors.New("want STOP"))
		}
		err = r.ReadStructEnd()
	case proto.LIST, proto.SET, proto.MAP:
		var n int
		if v.t == proto.MAP {
			_, _, n, err = r.ReadMapBegin()
			n *= 2
		} else {
			_, n, err = r.ReadListBegin()
		}
		if err == nil && n != len(v.elems) {
			err = errors.New("count mismatch")
		}
		for i := 0; err == nil && i < n; i++ {
			var e tv
			e, err = v.elems[i].read(r)
			got.elems = append(got.elems, e)
		}
	}
	return got, err
}

// tree is a Struct holding a random struct value; decoding reads into got
// with the shape of v.
type tree struct {
	v, got tv
}

func (x *tree) EncodeBinary(w *proto.BinaryWriter) error { x.v.write(w); return nil }
func (x *tree) DecodeBinary(r *proto.BinaryReader) (err error) {
	x.got, err = x.v.read(r)
	return err
}
func (x *tree) EncodeCompact(*proto.CompactWriter) error { return errors.ErrUnsupported }
func (x *tree) DecodeCompact(*proto.CompactReader) error { return errors.ErrUnsupported }

// apRead reads a value shaped like v through an Apache TProtocol.
func (v *tv) apRead(ctx context.Context, p thrift.TProtocol) (tv, error) {
	got := tv{t: v.t, bin: v.bin, et: v.et, vt: v.vt, ids: v.ids}
	var err error
	switch v.t {
	case proto.BOOL:
		var b bool
		if b, err = p.ReadBool(ctx); b {
			got.i = 1
		}
	case proto.I8:
		var x int8
		x, err = p.ReadByte(ctx)
		got.i = int64(x)
	case proto.I16:
		var x int16
		x, err = p.ReadI16(ctx)
		got.i = int64(x)
	case proto.I32:
		var x int32
		x, err = p.ReadI32(ctx)
		got.i = int64(x)
	case proto.I64:
		got.i, err = p.ReadI64(ctx)
	case proto.DOUBLE:
		got.d, err = p.ReadDouble(ctx)
	case proto.STRING:
		if v.bin {
			got.s, err = p.ReadBinary(ctx)
		} else {
			var s string
			s, err = p.ReadString(ctx)
			got.s = []byte(s)
		}
	case proto.UUID:
		var u thrift.Tuuid
		u, err = p.ReadUUID(ctx)
		got.u = u
	case proto.STRUCT:
		if _, err = p.ReadStructBegin(ctx); err != nil {
			return got, err
		}
		for i := range v.elems {
			_, t, id, ferr := p.ReadFieldBegin(ctx)
			if ferr != nil || proto.Type(t) != v.elems[i].t || id != v.ids[i] {
				return got, errors.Join(ferr, errors.New("field mismatch"))
			}
			e, ferr := v.elems[i].apRead(ctx, p)
			if ferr = errors.Join(ferr, p.ReadFieldEnd(ctx)); ferr != nil {
				return got, ferr
			}
			got.elems = append(got.elems, e)
		}
		if _, t, _, ferr := p.ReadFieldBegin(ctx); ferr != nil || t != thrift.STOP {
			return got, errors.Join(ferr, errors.New("want STOP"))
		}
		err = p.ReadStructEnd(ctx)
	case proto.LIST, proto.SET, proto.MAP:
		var n int
		switch v.t {
		case proto.MAP:
			_, _, n, err = p.ReadMapBegin(ctx)
			n *= 2
		case proto.SET:
			_, n, err = p.ReadSetBegin(ctx)
		default:
			_, n, err = p.ReadListBegin(ctx)
		}
		if err == nil && n != len(v.elems) {
			err = errors.New("count mismatch")
		}
		for i := 0; err == nil && i < n; i++ {
			var e tv
			e, err = v.elems[i].apRead(ctx, p)
			got.elems = append(got.elems, e)
		}
		if err == nil {
			switch v.t {
			case proto.MAP:
				err = p.ReadMapEnd(ctx)
			case proto.SET:
				err = p.ReadSetEnd(ctx)
			default:
				err = p.ReadListEnd(ctx)
			}
		}
	}
	return got, err
}
