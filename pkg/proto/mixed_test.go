// The Mixed workload's value and its Apache encoder/decoder; the type and
// its hatrpc methods are hatgen output, in workloads_gen_test.go.

package proto_test

import (
	"context"

	"github.com/apache/thrift/lib/go/thrift"
)

func newMixed() *Mixed {
	return &Mixed{B1: true, I8a: -3, I8b: 100, I16a: -300, I16b: 12000, I32a: 1, I32b: -70000,
		I32c: 1 << 30, I32d: -5, I64a: 1 << 40, I64b: -1, I64c: 123456789, I64d: 0, I64e: -1 << 50,
		D1: 3.25, D2: -1e-9, D3: 6.02e23, D4: 0, B3: true}
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
