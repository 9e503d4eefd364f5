// Code in this file was produced by a throwaway script in the style of
// hatgen output; it is the benchmark and fuzz workload.

package proto_test

import (
	"context"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Mixed is a struct with 20 mixed scalar fields.
type Mixed struct {
	B1   bool
	B2   bool
	I8a  int8
	I8b  int8
	I16a int16
	I16b int16
	I32a int32
	I32b int32
	I32c int32
	I32d int32
	I64a int64
	I64b int64
	I64c int64
	I64d int64
	I64e int64
	D1   float64
	D2   float64
	D3   float64
	D4   float64
	B3   bool
}

func newMixed() *Mixed {
	return &Mixed{B1: true, I8a: -3, I8b: 100, I16a: -300, I16b: 12000, I32a: 1, I32b: -70000,
		I32c: 1 << 30, I32d: -5, I64a: 1 << 40, I64b: -1, I64c: 123456789, I64d: 0, I64e: -1 << 50,
		D1: 3.25, D2: -1e-9, D3: 6.02e23, D4: 0, B3: true}
}

func (s *Mixed) EncodeBinary(w *proto.BinaryWriter) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.BOOL, 1)
	w.WriteBool(s.B1)
	w.WriteFieldBegin(proto.BOOL, 2)
	w.WriteBool(s.B2)
	w.WriteFieldBegin(proto.I8, 3)
	w.WriteI8(s.I8a)
	w.WriteFieldBegin(proto.I8, 4)
	w.WriteI8(s.I8b)
	w.WriteFieldBegin(proto.I16, 5)
	w.WriteI16(s.I16a)
	w.WriteFieldBegin(proto.I16, 6)
	w.WriteI16(s.I16b)
	w.WriteFieldBegin(proto.I32, 7)
	w.WriteI32(s.I32a)
	w.WriteFieldBegin(proto.I32, 8)
	w.WriteI32(s.I32b)
	w.WriteFieldBegin(proto.I32, 9)
	w.WriteI32(s.I32c)
	w.WriteFieldBegin(proto.I32, 10)
	w.WriteI32(s.I32d)
	w.WriteFieldBegin(proto.I64, 11)
	w.WriteI64(s.I64a)
	w.WriteFieldBegin(proto.I64, 12)
	w.WriteI64(s.I64b)
	w.WriteFieldBegin(proto.I64, 13)
	w.WriteI64(s.I64c)
	w.WriteFieldBegin(proto.I64, 14)
	w.WriteI64(s.I64d)
	w.WriteFieldBegin(proto.I64, 15)
	w.WriteI64(s.I64e)
	w.WriteFieldBegin(proto.DOUBLE, 16)
	w.WriteDouble(s.D1)
	w.WriteFieldBegin(proto.DOUBLE, 17)
	w.WriteDouble(s.D2)
	w.WriteFieldBegin(proto.DOUBLE, 18)
	w.WriteDouble(s.D3)
	w.WriteFieldBegin(proto.DOUBLE, 19)
	w.WriteDouble(s.D4)
	w.WriteFieldBegin(proto.BOOL, 20)
	w.WriteBool(s.B3)
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (s *Mixed) DecodeBinary(r *proto.BinaryReader) error {
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
		switch id {
		case 1:
			if t == proto.BOOL {
				s.B1, err = r.ReadBool()
			} else {
				err = r.Skip(t)
			}
		case 2:
			if t == proto.BOOL {
				s.B2, err = r.ReadBool()
			} else {
				err = r.Skip(t)
			}
		case 3:
			if t == proto.I8 {
				s.I8a, err = r.ReadI8()
			} else {
				err = r.Skip(t)
			}
		case 4:
			if t == proto.I8 {
				s.I8b, err = r.ReadI8()
			} else {
				err = r.Skip(t)
			}
		case 5:
			if t == proto.I16 {
				s.I16a, err = r.ReadI16()
			} else {
				err = r.Skip(t)
			}
		case 6:
			if t == proto.I16 {
				s.I16b, err = r.ReadI16()
			} else {
				err = r.Skip(t)
			}
		case 7:
			if t == proto.I32 {
				s.I32a, err = r.ReadI32()
			} else {
				err = r.Skip(t)
			}
		case 8:
			if t == proto.I32 {
				s.I32b, err = r.ReadI32()
			} else {
				err = r.Skip(t)
			}
		case 9:
			if t == proto.I32 {
				s.I32c, err = r.ReadI32()
			} else {
				err = r.Skip(t)
			}
		case 10:
			if t == proto.I32 {
				s.I32d, err = r.ReadI32()
			} else {
				err = r.Skip(t)
			}
		case 11:
			if t == proto.I64 {
				s.I64a, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 12:
			if t == proto.I64 {
				s.I64b, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 13:
			if t == proto.I64 {
				s.I64c, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 14:
			if t == proto.I64 {
				s.I64d, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 15:
			if t == proto.I64 {
				s.I64e, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 16:
			if t == proto.DOUBLE {
				s.D1, err = r.ReadDouble()
			} else {
				err = r.Skip(t)
			}
		case 17:
			if t == proto.DOUBLE {
				s.D2, err = r.ReadDouble()
			} else {
				err = r.Skip(t)
			}
		case 18:
			if t == proto.DOUBLE {
				s.D3, err = r.ReadDouble()
			} else {
				err = r.Skip(t)
			}
		case 19:
			if t == proto.DOUBLE {
				s.D4, err = r.ReadDouble()
			} else {
				err = r.Skip(t)
			}
		case 20:
			if t == proto.BOOL {
				s.B3, err = r.ReadBool()
			} else {
				err = r.Skip(t)
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

func (s *Mixed) EncodeCompact(w *proto.CompactWriter) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.BOOL, 1)
	w.WriteBool(s.B1)
	w.WriteFieldBegin(proto.BOOL, 2)
	w.WriteBool(s.B2)
	w.WriteFieldBegin(proto.I8, 3)
	w.WriteI8(s.I8a)
	w.WriteFieldBegin(proto.I8, 4)
	w.WriteI8(s.I8b)
	w.WriteFieldBegin(proto.I16, 5)
	w.WriteI16(s.I16a)
	w.WriteFieldBegin(proto.I16, 6)
	w.WriteI16(s.I16b)
	w.WriteFieldBegin(proto.I32, 7)
	w.WriteI32(s.I32a)
	w.WriteFieldBegin(proto.I32, 8)
	w.WriteI32(s.I32b)
	w.WriteFieldBegin(proto.I32, 9)
	w.WriteI32(s.I32c)
	w.WriteFieldBegin(proto.I32, 10)
	w.WriteI32(s.I32d)
	w.WriteFieldBegin(proto.I64, 11)
	w.WriteI64(s.I64a)
	w.WriteFieldBegin(proto.I64, 12)
	w.WriteI64(s.I64b)
	w.WriteFieldBegin(proto.I64, 13)
	w.WriteI64(s.I64c)
	w.WriteFieldBegin(proto.I64, 14)
	w.WriteI64(s.I64d)
	w.WriteFieldBegin(proto.I64, 15)
	w.WriteI64(s.I64e)
	w.WriteFieldBegin(proto.DOUBLE, 16)
	w.WriteDouble(s.D1)
	w.WriteFieldBegin(proto.DOUBLE, 17)
	w.WriteDouble(s.D2)
	w.WriteFieldBegin(proto.DOUBLE, 18)
	w.WriteDouble(s.D3)
	w.WriteFieldBegin(proto.DOUBLE, 19)
	w.WriteDouble(s.D4)
	w.WriteFieldBegin(proto.BOOL, 20)
	w.WriteBool(s.B3)
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (s *Mixed) DecodeCompact(r *proto.CompactReader) error {
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
		switch id {
		case 1:
			if t == proto.BOOL {
				s.B1, err = r.ReadBool()
			} else {
				err = r.Skip(t)
			}
		case 2:
			if t == proto.BOOL {
				s.B2, err = r.ReadBool()
			} else {
				err = r.Skip(t)
			}
		case 3:
			if t == proto.I8 {
				s.I8a, err = r.ReadI8()
			} else {
				err = r.Skip(t)
			}
		case 4:
			if t == proto.I8 {
				s.I8b, err = r.ReadI8()
			} else {
				err = r.Skip(t)
			}
		case 5:
			if t == proto.I16 {
				s.I16a, err = r.ReadI16()
			} else {
				err = r.Skip(t)
			}
		case 6:
			if t == proto.I16 {
				s.I16b, err = r.ReadI16()
			} else {
				err = r.Skip(t)
			}
		case 7:
			if t == proto.I32 {
				s.I32a, err = r.ReadI32()
			} else {
				err = r.Skip(t)
			}
		case 8:
			if t == proto.I32 {
				s.I32b, err = r.ReadI32()
			} else {
				err = r.Skip(t)
			}
		case 9:
			if t == proto.I32 {
				s.I32c, err = r.ReadI32()
			} else {
				err = r.Skip(t)
			}
		case 10:
			if t == proto.I32 {
				s.I32d, err = r.ReadI32()
			} else {
				err = r.Skip(t)
			}
		case 11:
			if t == proto.I64 {
				s.I64a, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 12:
			if t == proto.I64 {
				s.I64b, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 13:
			if t == proto.I64 {
				s.I64c, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 14:
			if t == proto.I64 {
				s.I64d, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 15:
			if t == proto.I64 {
				s.I64e, err = r.ReadI64()
			} else {
				err = r.Skip(t)
			}
		case 16:
			if t == proto.DOUBLE {
				s.D1, err = r.ReadDouble()
			} else {
				err = r.Skip(t)
			}
		case 17:
			if t == proto.DOUBLE {
				s.D2, err = r.ReadDouble()
			} else {
				err = r.Skip(t)
			}
		case 18:
			if t == proto.DOUBLE {
				s.D3, err = r.ReadDouble()
			} else {
				err = r.Skip(t)
			}
		case 19:
			if t == proto.DOUBLE {
				s.D4, err = r.ReadDouble()
			} else {
				err = r.Skip(t)
			}
		case 20:
			if t == proto.BOOL {
				s.B3, err = r.ReadBool()
			} else {
				err = r.Skip(t)
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

func apMixedWrite(ctx context.Context, p thrift.TProtocol, s *Mixed) error {
	if err := p.WriteStructBegin(ctx, "Mixed"); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "B1", thrift.BOOL, 1); err != nil {
		return err
	}
	if err := p.WriteBool(ctx, s.B1); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "B2", thrift.BOOL, 2); err != nil {
		return err
	}
	if err := p.WriteBool(ctx, s.B2); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I8a", thrift.BYTE, 3); err != nil {
		return err
	}
	if err := p.WriteByte(ctx, s.I8a); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I8b", thrift.BYTE, 4); err != nil {
		return err
	}
	if err := p.WriteByte(ctx, s.I8b); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I16a", thrift.I16, 5); err != nil {
		return err
	}
	if err := p.WriteI16(ctx, s.I16a); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I16b", thrift.I16, 6); err != nil {
		return err
	}
	if err := p.WriteI16(ctx, s.I16b); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I32a", thrift.I32, 7); err != nil {
		return err
	}
	if err := p.WriteI32(ctx, s.I32a); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I32b", thrift.I32, 8); err != nil {
		return err
	}
	if err := p.WriteI32(ctx, s.I32b); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I32c", thrift.I32, 9); err != nil {
		return err
	}
	if err := p.WriteI32(ctx, s.I32c); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I32d", thrift.I32, 10); err != nil {
		return err
	}
	if err := p.WriteI32(ctx, s.I32d); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I64a", thrift.I64, 11); err != nil {
		return err
	}
	if err := p.WriteI64(ctx, s.I64a); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I64b", thrift.I64, 12); err != nil {
		return err
	}
	if err := p.WriteI64(ctx, s.I64b); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I64c", thrift.I64, 13); err != nil {
		return err
	}
	if err := p.WriteI64(ctx, s.I64c); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I64d", thrift.I64, 14); err != nil {
		return err
	}
	if err := p.WriteI64(ctx, s.I64d); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "I64e", thrift.I64, 15); err != nil {
		return err
	}
	if err := p.WriteI64(ctx, s.I64e); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "D1", thrift.DOUBLE, 16); err != nil {
		return err
	}
	if err := p.WriteDouble(ctx, s.D1); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "D2", thrift.DOUBLE, 17); err != nil {
		return err
	}
	if err := p.WriteDouble(ctx, s.D2); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "D3", thrift.DOUBLE, 18); err != nil {
		return err
	}
	if err := p.WriteDouble(ctx, s.D3); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "D4", thrift.DOUBLE, 19); err != nil {
		return err
	}
	if err := p.WriteDouble(ctx, s.D4); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "B3", thrift.BOOL, 20); err != nil {
		return err
	}
	if err := p.WriteBool(ctx, s.B3); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldStop(ctx); err != nil {
		return err
	}
	return p.WriteStructEnd(ctx)
}

func apMixedRead(ctx context.Context, p thrift.TProtocol, s *Mixed) error {
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
			if t == thrift.BOOL {
				s.B1, err = p.ReadBool(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 2:
			if t == thrift.BOOL {
				s.B2, err = p.ReadBool(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 3:
			if t == thrift.BYTE {
				s.I8a, err = p.ReadByte(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 4:
			if t == thrift.BYTE {
				s.I8b, err = p.ReadByte(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 5:
			if t == thrift.I16 {
				s.I16a, err = p.ReadI16(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 6:
			if t == thrift.I16 {
				s.I16b, err = p.ReadI16(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 7:
			if t == thrift.I32 {
				s.I32a, err = p.ReadI32(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 8:
			if t == thrift.I32 {
				s.I32b, err = p.ReadI32(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 9:
			if t == thrift.I32 {
				s.I32c, err = p.ReadI32(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 10:
			if t == thrift.I32 {
				s.I32d, err = p.ReadI32(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 11:
			if t == thrift.I64 {
				s.I64a, err = p.ReadI64(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 12:
			if t == thrift.I64 {
				s.I64b, err = p.ReadI64(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 13:
			if t == thrift.I64 {
				s.I64c, err = p.ReadI64(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 14:
			if t == thrift.I64 {
				s.I64d, err = p.ReadI64(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 15:
			if t == thrift.I64 {
				s.I64e, err = p.ReadI64(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 16:
			if t == thrift.DOUBLE {
				s.D1, err = p.ReadDouble(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 17:
			if t == thrift.DOUBLE {
				s.D2, err = p.ReadDouble(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 18:
			if t == thrift.DOUBLE {
				s.D3, err = p.ReadDouble(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 19:
			if t == thrift.DOUBLE {
				s.D4, err = p.ReadDouble(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		case 20:
			if t == thrift.BOOL {
				s.B3, err = p.ReadBool(ctx)
			} else {
				err = thrift.SkipDefaultDepth(ctx, p, t)
			}
		default:
			err = thrift.SkipDefaultDepth(ctx, p, t)
		}
		if err != nil {
			return err
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return err
		}
	}
	return p.ReadStructEnd(ctx)
}
