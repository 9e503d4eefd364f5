package proto_test

import (
	"context"
	"math/rand/v2"
	"sort"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Nested and AllTypes mimic generated code for:
//
//	struct Nested { 1: i64 a, 2: string s, 3: list<bool> flags }
//	struct AllTypes { 1: bool b, 2: i8, 3: i16, 4: i32, 5: i64, 6: double,
//	  7: string, 8: binary, 9: uuid, 10: list<i32>, 11: set<string>,
//	  12: map<string,i64>, 13: Nested, 14: list<Nested>,
//	  15: map<i32,list<binary>>, 16: bool b2, 300: i16 far,
//	  20: list<double>, 21: list<uuid> }
//
// Fields are written in the order above (300 before 20) so compact has to
// use both the delta and the long field header forms.
type Nested struct {
	A     int64
	S     string
	Flags []bool
}

type AllTypes struct {
	B   bool
	I8  int8
	I16 int16
	I32 int32
	I64 int64
	D   float64
	S   string
	Bin []byte
	U   [16]byte
	L   []int32
	Set []string
	M   map[string]int64
	N   Nested
	LN  []Nested
	MB  map[int32][][]byte
	B2  bool
	Far int16
	LD  []float64
	LU  [][16]byte
}

// writer/reader are the method sets shared by both protocols; the generic
// helpers keep the test struct to one implementation.
type writer interface {
	WriteStructBegin()
	WriteStructEnd()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteBool(v bool)
	WriteI8(v int8)
	WriteI16(v int16)
	WriteI32(v int32)
	WriteI64(v int64)
	WriteDouble(v float64)
	WriteString(v string)
	WriteBinary(v []byte)
	WriteUUID(v [16]byte)
	WriteListBegin(elem proto.Type, n int)
	WriteSetBegin(elem proto.Type, n int)
	WriteMapBegin(key, val proto.Type, n int)
}

type reader interface {
	ReadStructBegin() error
	ReadStructEnd() error
	ReadFieldBegin() (proto.Type, int16, error)
	ReadBool() (bool, error)
	ReadI8() (int8, error)
	ReadI16() (int16, error)
	ReadI32() (int32, error)
	ReadI64() (int64, error)
	ReadDouble() (float64, error)
	ReadString() (string, error)
	ReadBinary() ([]byte, error)
	ReadUUID() ([16]byte, error)
	ReadListBegin() (proto.Type, int, error)
	ReadSetBegin() (proto.Type, int, error)
	ReadMapBegin() (proto.Type, proto.Type, int, error)
	Skip(t proto.Type) error
}

func sortedKeys[K int32 | string, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

func encNested[W writer](w W, n *Nested) {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.I64, 1)
	w.WriteI64(n.A)
	w.WriteFieldBegin(proto.STRING, 2)
	w.WriteString(n.S)
	w.WriteFieldBegin(proto.LIST, 3)
	w.WriteListBegin(proto.BOOL, len(n.Flags))
	for _, f := range n.Flags {
		w.WriteBool(f)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
}

func encAll[W writer](w W, s *AllTypes) {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.BOOL, 1)
	w.WriteBool(s.B)
	w.WriteFieldBegin(proto.I8, 2)
	w.WriteI8(s.I8)
	w.WriteFieldBegin(proto.I16, 3)
	w.WriteI16(s.I16)
	w.WriteFieldBegin(proto.I32, 4)
	w.WriteI32(s.I32)
	w.WriteFieldBegin(proto.I64, 5)
	w.WriteI64(s.I64)
	w.WriteFieldBegin(proto.DOUBLE, 6)
	w.WriteDouble(s.D)
	w.WriteFieldBegin(proto.STRING, 7)
	w.WriteString(s.S)
	w.WriteFieldBegin(proto.STRING, 8)
	w.WriteBinary(s.Bin)
	w.WriteFieldBegin(proto.UUID, 9)
	w.WriteUUID(s.U)
	w.WriteFieldBegin(proto.LIST, 10)
	w.WriteListBegin(proto.I32, len(s.L))
	for _, v := range s.L {
		w.WriteI32(v)
	}
	w.WriteFieldBegin(proto.SET, 11)
	w.WriteSetBegin(proto.STRING, len(s.Set))
	for _, v := range s.Set {
		w.WriteString(v)
	}
	w.WriteFieldBegin(proto.MAP, 12)
	w.WriteMapBegin(proto.STRING, proto.I64, len(s.M))
	for _, k := range sortedKeys(s.M) {
		w.WriteString(k)
		w.WriteI64(s.M[k])
	}
	w.WriteFieldBegin(proto.STRUCT, 13)
	encNested(w, &s.N)
	w.WriteFieldBegin(proto.LIST, 14)
	w.WriteListBegin(proto.STRUCT, len(s.LN))
	for i := range s.LN {
		encNested(w, &s.LN[i])
	}
	w.WriteFieldBegin(proto.MAP, 15)
	w.WriteMapBegin(proto.I32, proto.LIST, len(s.MB))
	for _, k := range sortedKeys(s.MB) {
		w.WriteI32(k)
		l := s.MB[k]
		w.WriteListBegin(proto.STRING, len(l))
		for _, b := range l {
			w.WriteBinary(b)
		}
	}
	w.WriteFieldBegin(proto.BOOL, 16)
	w.WriteBool(s.B2)
	w.WriteFieldBegin(proto.I16, 300)
	w.WriteI16(s.Far)
	w.WriteFieldBegin(proto.LIST, 20)
	w.WriteListBegin(proto.DOUBLE, len(s.LD))
	for _, v := range s.LD {
		w.WriteDouble(v)
	}
	w.WriteFieldBegin(proto.LIST, 21)
	w.WriteListBegin(proto.UUID, len(s.LU))
	for _, v := range s.LU {
		w.WriteUUID(v)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
}

func decNested[R reader](r R, n *Nested) error {
	*n = Nested{}
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == proto.STOP {
			break
		}
		switch {
		case id == 1 && t == proto.I64:
			n.A, err = r.ReadI64()
		case id == 2 && t == proto.STRING:
			n.S, err = r.ReadString()
		case id == 3 && t == proto.LIST:
			var cnt int
			if _, cnt, err = r.ReadListBegin(); err != nil {
				return err
			}
			n.Flags = make([]bool, cnt)
			for i := range n.Flags {
				if n.Flags[i], err = r.ReadBool(); err != nil {
					return err
				}
			}
		default:
			err = r.Skip(t)
		}
		if err != nil {
			return err
		}
	}
	return r.ReadStructEnd()
}

func decAll[R reader](r R, s *AllTypes) error {
	*s = AllTypes{}
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == proto.STOP {
			break
		}
		if err := decAllField(r, s, t, id); err != nil {
			return err
		}
	}
	return r.ReadStructEnd()
}

func decAllField[R reader](r R, s *AllTypes, t proto.Type, id int16) (err error) {
	var cnt int
	switch {
	case id == 1 && t == proto.BOOL:
		s.B, err = r.ReadBool()
	case id == 2 && t == proto.I8:
		s.I8, err = r.ReadI8()
	case id == 3 && t == proto.I16:
		s.I16, err = r.ReadI16()
	case id == 4 && t == proto.I32:
		s.I32, err = r.ReadI32()
	case id == 5 && t == proto.I64:
		s.I64, err = r.ReadI64()
	case id == 6 && t == proto.DOUBLE:
		s.D, err = r.ReadDouble()
	case id == 7 && t == proto.STRING:
		s.S, err = r.ReadString()
	case id == 8 && t == proto.STRING:
		s.Bin, err = r.ReadBinary()
	case id == 9 && t == proto.UUID:
		s.U, err = r.ReadUUID()
	case id == 10 && t == proto.LIST:
		if _, cnt, err = r.ReadListBegin(); err != nil {
			return err
		}
		s.L = make([]int32, cnt)
		for i := range s.L {
			if s.L[i], err = r.ReadI32(); err != nil {
				return err
			}
		}
	case id == 11 && t == proto.SET:
		if _, cnt, err = r.ReadSetBegin(); err != nil {
			return err
		}
		s.Set = make([]string, cnt)
		for i := range s.Set {
			if s.Set[i], err = r.ReadString(); err != nil {
				return err
			}
		}
	case id == 12 && t == proto.MAP:
		if _, _, cnt, err = r.ReadMapBegin(); err != nil {
			return err
		}
		s.M = make(map[string]int64, cnt)
		for range cnt {
			k, err := r.ReadString()
			if err != nil {
				return err
			}
			if s.M[k], err = r.ReadI64(); err != nil {
				return err
			}
		}
	case id == 13 && t == proto.STRUCT:
		err = decNested(r, &s.N)
	case id == 14 && t == proto.LIST:
		if _, cnt, err = r.ReadListBegin(); err != nil {
			return err
		}
		s.LN = make([]Nested, cnt)
		for i := range s.LN {
			if err = decNested(r, &s.LN[i]); err != nil {
				return err
			}
		}
	case id == 15 && t == proto.MAP:
		if _, _, cnt, err = r.ReadMapBegin(); err != nil {
			return err
		}
		s.MB = make(map[int32][][]byte, cnt)
		for range cnt {
			k, err := r.ReadI32()
			if err != nil {
				return err
			}
			_, n, err := r.ReadListBegin()
			if err != nil {
				return err
			}
			l := make([][]byte, n)
			for i := range l {
				if l[i], err = r.ReadBinary(); err != nil {
					return err
				}
			}
			s.MB[k] = l
		}
	case id == 16 && t == proto.BOOL:
		s.B2, err = r.ReadBool()
	case id == 300 && t == proto.I16:
		s.Far, err = r.ReadI16()
	case id == 20 && t == proto.LIST:
		if _, cnt, err = r.ReadListBegin(); err != nil {
			return err
		}
		s.LD = make([]float64, cnt)
		for i := range s.LD {
			if s.LD[i], err = r.ReadDouble(); err != nil {
				return err
			}
		}
	case id == 21 && t == proto.LIST:
		if _, cnt, err = r.ReadListBegin(); err != nil {
			return err
		}
		s.LU = make([][16]byte, cnt)
		for i := range s.LU {
			if s.LU[i], err = r.ReadUUID(); err != nil {
				return err
			}
		}
	default:
		err = r.Skip(t)
	}
	return err
}

func (s *AllTypes) EncodeBinary(w *proto.BinaryWriter) error   { encAll(w, s); return nil }
func (s *AllTypes) EncodeCompact(w *proto.CompactWriter) error { encAll(w, s); return nil }
func (s *AllTypes) DecodeBinary(r *proto.BinaryReader) error   { return decAll(r, s) }
func (s *AllTypes) DecodeCompact(r *proto.CompactReader) error { return decAll(r, s) }

// Generic is a schema-less struct: decoding it skips every field, which is
// what a peer with an older schema does.
type Generic struct{ Fields int }

func (g *Generic) EncodeBinary(w *proto.BinaryWriter) error   { w.WriteFieldStop(); return nil }
func (g *Generic) EncodeCompact(w *proto.CompactWriter) error { w.WriteFieldStop(); return nil }
func (g *Generic) DecodeBinary(r *proto.BinaryReader) error   { return decGeneric(r, g) }
func (g *Generic) DecodeCompact(r *proto.CompactReader) error { return decGeneric(r, g) }

func decGeneric[R reader](r R, g *Generic) error {
	g.Fields = 0
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	for {
		t, _, err := r.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == proto.STOP {
			break
		}
		if err := r.Skip(t); err != nil {
			return err
		}
		g.Fields++
	}
	return r.ReadStructEnd()
}

func randBytes(rng *rand.Rand, max int) []byte {
	b := make([]byte, rng.IntN(max+1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func randFloat(rng *rand.Rand) float64 {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return rng.NormFloat64() * 1e300
	}
	return rng.NormFloat64() * 1000
}

// randInt returns values biased towards varint size boundaries.
func randInt(rng *rand.Rand, bits uint) int64 {
	v := int64(rng.Uint64())
	switch rng.IntN(3) {
	case 0:
		v >>= rng.UintN(64)
	case 1:
		v = -(v >> rng.UintN(64))
	}
	return v << (64 - bits) >> (64 - bits)
}

func randNested(rng *rand.Rand) Nested {
	n := Nested{A: randInt(rng, 64), S: string(randBytes(rng, 40)), Flags: make([]bool, rng.IntN(20))}
	for i := range n.Flags {
		n.Flags[i] = rng.IntN(2) == 1
	}
	return n
}

func randAll(rng *rand.Rand) *AllTypes {
	s := &AllTypes{
		B: rng.IntN(2) == 1, I8: int8(randInt(rng, 8)), I16: int16(randInt(rng, 16)),
		I32: int32(randInt(rng, 32)), I64: randInt(rng, 64), D: randFloat(rng),
		S: string(randBytes(rng, 300)), Bin: randBytes(rng, 300), B2: rng.IntN(2) == 1,
		Far: int16(randInt(rng, 16)), N: randNested(rng),
		L: make([]int32, rng.IntN(40)), Set: make([]string, rng.IntN(18)),
		M: map[string]int64{}, MB: map[int32][][]byte{}, LN: make([]Nested, rng.IntN(4)),
		LD: make([]float64, rng.IntN(20)), LU: make([][16]byte, rng.IntN(3)),
	}
	copy(s.U[:], randBytes(rng, 16))
	for i := range s.L {
		s.L[i] = int32(randInt(rng, 32))
	}
	for i := range s.Set {
		s.Set[i] = string(randBytes(rng, 20))
	}
	for range rng.IntN(20) {
		s.M[string(randBytes(rng, 10))] = randInt(rng, 64)
	}
	for i := range s.LN {
		s.LN[i] = randNested(rng)
	}
	for range rng.IntN(4) {
		l := make([][]byte, rng.IntN(17))
		for i := range l {
			l[i] = randBytes(rng, 200)
		}
		s.MB[int32(randInt(rng, 32))] = l
	}
	for i := range s.LD {
		s.LD[i] = randFloat(rng)
	}
	for i := range s.LU {
		copy(s.LU[i][:], randBytes(rng, 16))
	}
	return s
}

// Apache side: the same schema through thrift.TProtocol.

func apNestedWrite(ctx context.Context, p thrift.TProtocol, n *Nested) error {
	if err := p.WriteStructBegin(ctx, "Nested"); err != nil {
		return err
	}
	_ = p.WriteFieldBegin(ctx, "a", thrift.I64, 1)
	_ = p.WriteI64(ctx, n.A)
	_ = p.WriteFieldBegin(ctx, "s", thrift.STRING, 2)
	_ = p.WriteString(ctx, n.S)
	_ = p.WriteFieldBegin(ctx, "flags", thrift.LIST, 3)
	_ = p.WriteListBegin(ctx, thrift.BOOL, len(n.Flags))
	for _, f := range n.Flags {
		_ = p.WriteBool(ctx, f)
	}
	_ = p.WriteFieldStop(ctx)
	return p.WriteStructEnd(ctx)
}

func apAllWrite(ctx context.Context, p thrift.TProtocol, s *AllTypes) error {
	_ = p.WriteStructBegin(ctx, "AllTypes")
	_ = p.WriteFieldBegin(ctx, "b", thrift.BOOL, 1)
	_ = p.WriteBool(ctx, s.B)
	_ = p.WriteFieldBegin(ctx, "i8", thrift.BYTE, 2)
	_ = p.WriteByte(ctx, s.I8)
	_ = p.WriteFieldBegin(ctx, "i16", thrift.I16, 3)
	_ = p.WriteI16(ctx, s.I16)
	_ = p.WriteFieldBegin(ctx, "i32", thrift.I32, 4)
	_ = p.WriteI32(ctx, s.I32)
	_ = p.WriteFieldBegin(ctx, "i64", thrift.I64, 5)
	_ = p.WriteI64(ctx, s.I64)
	_ = p.WriteFieldBegin(ctx, "d", thrift.DOUBLE, 6)
	_ = p.WriteDouble(ctx, s.D)
	_ = p.WriteFieldBegin(ctx, "s", thrift.STRING, 7)
	_ = p.WriteString(ctx, s.S)
	_ = p.WriteFieldBegin(ctx, "bin", thrift.STRING, 8)
	_ = p.WriteBinary(ctx, s.Bin)
	_ = p.WriteFieldBegin(ctx, "u", thrift.UUID, 9)
	_ = p.WriteUUID(ctx, thrift.Tuuid(s.U))
	_ = p.WriteFieldBegin(ctx, "l", thrift.LIST, 10)
	_ = p.WriteListBegin(ctx, thrift.I32, len(s.L))
	for _, v := range s.L {
		_ = p.WriteI32(ctx, v)
	}
	_ = p.WriteFieldBegin(ctx, "set", thrift.SET, 11)
	_ = p.WriteSetBegin(ctx, thrift.STRING, len(s.Set))
	for _, v := range s.Set {
		_ = p.WriteString(ctx, v)
	}
	_ = p.WriteFieldBegin(ctx, "m", thrift.MAP, 12)
	_ = p.WriteMapBegin(ctx, thrift.STRING, thrift.I64, len(s.M))
	for _, k := range sortedKeys(s.M) {
		_ = p.WriteString(ctx, k)
		_ = p.WriteI64(ctx, s.M[k])
	}
	_ = p.WriteFieldBegin(ctx, "n", thrift.STRUCT, 13)
	_ = apNestedWrite(ctx, p, &s.N)
	_ = p.WriteFieldBegin(ctx, "ln", thrift.LIST, 14)
	_ = p.WriteListBegin(ctx, thrift.STRUCT, len(s.LN))
	for i := range s.LN {
		_ = apNestedWrite(ctx, p, &s.LN[i])
	}
	_ = p.WriteFieldBegin(ctx, "mb", thrift.MAP, 15)
	_ = p.WriteMapBegin(ctx, thrift.I32, thrift.LIST, len(s.MB))
	for _, k := range sortedKeys(s.MB) {
		_ = p.WriteI32(ctx, k)
		l := s.MB[k]
		_ = p.WriteListBegin(ctx, thrift.STRING, len(l))
		for _, b := range l {
			_ = p.WriteBinary(ctx, b)
		}
	}
	_ = p.WriteFieldBegin(ctx, "b2", thrift.BOOL, 16)
	_ = p.WriteBool(ctx, s.B2)
	_ = p.WriteFieldBegin(ctx, "far", thrift.I16, 300)
	_ = p.WriteI16(ctx, s.Far)
	_ = p.WriteFieldBegin(ctx, "ld", thrift.LIST, 20)
	_ = p.WriteListBegin(ctx, thrift.DOUBLE, len(s.LD))
	for _, v := range s.LD {
		_ = p.WriteDouble(ctx, v)
	}
	_ = p.WriteFieldBegin(ctx, "lu", thrift.LIST, 21)
	_ = p.WriteListBegin(ctx, thrift.UUID, len(s.LU))
	for _, v := range s.LU {
		_ = p.WriteUUID(ctx, thrift.Tuuid(v))
	}
	_ = p.WriteFieldStop(ctx)
	if err := p.WriteStructEnd(ctx); err != nil {
		return err
	}
	return p.Flush(ctx)
}

func apNestedRead(ctx context.Context, p thrift.TProtocol, n *Nested) error {
	*n = Nested{}
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return err
	}
	for {
		_, t, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return err
		}
		if t == thrift.STOP {
			break
		}
		switch id {
		case 1:
			n.A, err = p.ReadI64(ctx)
		case 2:
			n.S, err = p.ReadString(ctx)
		case 3:
			var cnt int
			if _, cnt, err = p.ReadListBegin(ctx); err != nil {
				return err
			}
			n.Flags = make([]bool, cnt)
			for i := range n.Flags {
				if n.Flags[i], err = p.ReadBool(ctx); err != nil {
					return err
				}
			}
			err = p.ReadListEnd(ctx)
		default:
			err = thrift.SkipDefaultDepth(ctx, p, t)
		}
		if err != nil {
			return err
		}
	}
	return p.ReadStructEnd(ctx)
}

func apAllRead(ctx context.Context, p thrift.TProtocol, s *AllTypes) error {
	*s = AllTypes{}
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return err
	}
	for {
		_, t, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return err
		}
		if t == thrift.STOP {
			break
		}
		if err := apAllField(ctx, p, s, t, id); err != nil {
			return err
		}
	}
	return p.ReadStructEnd(ctx)
}

func apAllField(ctx context.Context, p thrift.TProtocol, s *AllTypes, t thrift.TType, id int16) (err error) {
	var cnt int
	switch id {
	case 1:
		s.B, err = p.ReadBool(ctx)
	case 2:
		s.I8, err = p.ReadByte(ctx)
	case 3:
		s.I16, err = p.ReadI16(ctx)
	case 4:
		s.I32, err = p.ReadI32(ctx)
	case 5:
		s.I64, err = p.ReadI64(ctx)
	case 6:
		s.D, err = p.ReadDouble(ctx)
	case 7:
		s.S, err = p.ReadString(ctx)
	case 8:
		s.Bin, err = p.ReadBinary(ctx)
	case 9:
		var u thrift.Tuuid
		u, err = p.ReadUUID(ctx)
		s.U = u
	case 10:
		if _, cnt, err = p.ReadListBegin(ctx); err != nil {
			return err
		}
		s.L = make([]int32, cnt)
		for i := range s.L {
			if s.L[i], err = p.ReadI32(ctx); err != nil {
				return err
			}
		}
	case 11:
		if _, cnt, err = p.ReadSetBegin(ctx); err != nil {
			return err
		}
		s.Set = make([]string, cnt)
		for i := range s.Set {
			if s.Set[i], err = p.ReadString(ctx); err != nil {
				return err
			}
		}
	case 12:
		if _, _, cnt, err = p.ReadMapBegin(ctx); err != nil {
			return err
		}
		s.M = make(map[string]int64, cnt)
		for range cnt {
			k, err := p.ReadString(ctx)
			if err != nil {
				return err
			}
			if s.M[k], err = p.ReadI64(ctx); err != nil {
				return err
			}
		}
	case 13:
		err = apNestedRead(ctx, p, &s.N)
	case 14:
		if _, cnt, err = p.ReadListBegin(ctx); err != nil {
			return err
		}
		s.LN = make([]Nested, cnt)
		for i := range s.LN {
			if err = apNestedRead(ctx, p, &s.LN[i]); err != nil {
				return err
			}
		}
	case 15:
		if _, _, cnt, err = p.ReadMapBegin(ctx); err != nil {
			return err
		}
		s.MB = make(map[int32][][]byte, cnt)
		for range cnt {
			k, err := p.ReadI32(ctx)
			if err != nil {
				return err
			}
			_, n, err := p.ReadListBegin(ctx)
			if err != nil {
				return err
			}
			l := make([][]byte, n)
			for i := range l {
				if l[i], err = p.ReadBinary(ctx); err != nil {
					return err
				}
			}
			s.MB[k] = l
		}
	case 16:
		s.B2, err = p.ReadBool(ctx)
	case 300:
		s.Far, err = p.ReadI16(ctx)
	case 20:
		if _, cnt, err = p.ReadListBegin(ctx); err != nil {
			return err
		}
		s.LD = make([]float64, cnt)
		for i := range s.LD {
			if s.LD[i], err = p.ReadDouble(ctx); err != nil {
				return err
			}
		}
	case 21:
		if _, cnt, err = p.ReadListBegin(ctx); err != nil {
			return err
		}
		s.LU = make([][16]byte, cnt)
		for i := range s.LU {
			var u thrift.Tuuid
			if u, err = p.ReadUUID(ctx); err != nil {
				return err
			}
			s.LU[i] = u
		}
	default:
		err = thrift.SkipDefaultDepth(ctx, p, t)
	}
	return err
}
