package proto_test

import (
	"context"
	"fmt"

	"github.com/apache/thrift/lib/go/thrift"
)

// The workload types and their hatrpc methods are hatgen output, in
// workloads_gen_test.go; this file builds their values and holds the Apache
// encoders and decoders of the same schemas.

func newYCSB() (*YCSBMap, *YCSBList) {
	m := &YCSBMap{Key: "user00000000000000012345", Fields: make(map[string][]byte, 10)}
	l := &YCSBList{Key: m.Key}
	for i := range 10 {
		v := make([]byte, 100)
		for j := range v {
			v[j] = byte('a' + (i+j)%26)
		}
		m.Fields[fmt.Sprintf("field%d", i)] = v
		l.Values = append(l.Values, v)
	}
	return m, l
}

func newI64List() *I64List {
	s := &I64List{Values: make([]int64, 1000)}
	for i := range s.Values {
		s.Values[i] = int64(i) * 7919 * int64(1-2*(i%2)) << (i % 40)
	}
	return s
}

// Apache versions of the same three schemas.

func apYCSBMapWrite(ctx context.Context, p thrift.TProtocol, s *YCSBMap) error {
	_ = p.WriteStructBegin(ctx, "Record")
	_ = p.WriteFieldBegin(ctx, "key", thrift.STRING, 1)
	_ = p.WriteString(ctx, s.Key)
	_ = p.WriteFieldEnd(ctx)
	_ = p.WriteFieldBegin(ctx, "fields", thrift.MAP, 2)
	_ = p.WriteMapBegin(ctx, thrift.STRING, thrift.STRING, len(s.Fields))
	for k, v := range s.Fields {
		_ = p.WriteString(ctx, k)
		if err := p.WriteBinary(ctx, v); err != nil {
			return err
		}
	}
	_ = p.WriteMapEnd(ctx)
	_ = p.WriteFieldEnd(ctx)
	_ = p.WriteFieldStop(ctx)
	return p.WriteStructEnd(ctx)
}

func apYCSBMapRead(ctx context.Context, p thrift.TProtocol, s *YCSBMap) error {
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
		switch {
		case id == 1 && t == thrift.STRING:
			s.Key, err = p.ReadString(ctx)
		case id == 2 && t == thrift.MAP:
			var n int
			if _, _, n, err = p.ReadMapBegin(ctx); err != nil {
				return err
			}
			m := make(map[string][]byte, n)
			for range n {
				k, err := p.ReadString(ctx)
				if err != nil {
					return err
				}
				v, err := p.ReadBinary(ctx)
				if err != nil {
					return err
				}
				m[k] = v
			}
			s.Fields = m
			err = p.ReadMapEnd(ctx)
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

func apYCSBListWrite(ctx context.Context, p thrift.TProtocol, s *YCSBList) error {
	_ = p.WriteStructBegin(ctx, "Record")
	_ = p.WriteFieldBegin(ctx, "key", thrift.STRING, 1)
	_ = p.WriteString(ctx, s.Key)
	_ = p.WriteFieldEnd(ctx)
	_ = p.WriteFieldBegin(ctx, "values", thrift.LIST, 2)
	_ = p.WriteListBegin(ctx, thrift.STRING, len(s.Values))
	for _, v := range s.Values {
		if err := p.WriteBinary(ctx, v); err != nil {
			return err
		}
	}
	_ = p.WriteListEnd(ctx)
	_ = p.WriteFieldEnd(ctx)
	_ = p.WriteFieldStop(ctx)
	return p.WriteStructEnd(ctx)
}

func apYCSBListRead(ctx context.Context, p thrift.TProtocol, s *YCSBList) error {
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
		switch {
		case id == 1 && t == thrift.STRING:
			s.Key, err = p.ReadString(ctx)
		case id == 2 && t == thrift.LIST:
			var n int
			if _, n, err = p.ReadListBegin(ctx); err != nil {
				return err
			}
			l := make([][]byte, n)
			for i := range l {
				if l[i], err = p.ReadBinary(ctx); err != nil {
					return err
				}
			}
			s.Values = l
			err = p.ReadListEnd(ctx)
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

func apI64ListWrite(ctx context.Context, p thrift.TProtocol, s *I64List) error {
	_ = p.WriteStructBegin(ctx, "Longs")
	_ = p.WriteFieldBegin(ctx, "values", thrift.LIST, 1)
	_ = p.WriteListBegin(ctx, thrift.I64, len(s.Values))
	for _, v := range s.Values {
		if err := p.WriteI64(ctx, v); err != nil {
			return err
		}
	}
	_ = p.WriteListEnd(ctx)
	_ = p.WriteFieldEnd(ctx)
	_ = p.WriteFieldStop(ctx)
	return p.WriteStructEnd(ctx)
}

func apI64ListRead(ctx context.Context, p thrift.TProtocol, s *I64List) error {
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
		if id == 1 && t == thrift.LIST {
			var n int
			if _, n, err = p.ReadListBegin(ctx); err != nil {
				return err
			}
			l := make([]int64, n)
			for i := range l {
				if l[i], err = p.ReadI64(ctx); err != nil {
					return err
				}
			}
			s.Values = l
			err = p.ReadListEnd(ctx)
		} else {
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
