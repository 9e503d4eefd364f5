package testutil

import (
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// I32Struct is a struct of at most one i32 field with the given id: the
// shape of `sleep`'s args (1: i32 ms) and result (0: i32 success). It lets
// fault tests speak the Interop wire format byte-exactly without any
// generated code, e.g. from a bare TCP connection.
type I32Struct struct {
	ID  int16
	V   int32
	Set bool
}

// EmptyStruct is a struct without fields: ping's args and result.
type EmptyStruct struct{}

var (
	_ proto.Struct = (*I32Struct)(nil)
	_ proto.Struct = (*EmptyStruct)(nil)
)

// fieldReader is the part of both readers the decoders need.
type fieldReader interface {
	ReadStructBegin() error
	ReadStructEnd() error
	ReadFieldBegin() (proto.Type, int16, error)
	ReadI32() (int32, error)
	Skip(proto.Type) error
}

func decodeI32(r fieldReader, s *I32Struct) error {
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
		if id == s.ID && t == proto.I32 {
			if s.V, err = r.ReadI32(); err != nil {
				return err
			}
			s.Set = true
			continue
		}
		if err := r.Skip(t); err != nil {
			return err
		}
	}
}

func (s *I32Struct) EncodeBinary(w *proto.BinaryWriter) error {
	w.WriteStructBegin()
	if s.Set {
		w.WriteFieldBegin(proto.I32, s.ID)
		w.WriteI32(s.V)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (s *I32Struct) EncodeCompact(w *proto.CompactWriter) error {
	w.WriteStructBegin()
	if s.Set {
		w.WriteFieldBegin(proto.I32, s.ID)
		w.WriteI32(s.V)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (s *I32Struct) DecodeBinary(r *proto.BinaryReader) error   { return decodeI32(r, s) }
func (s *I32Struct) DecodeCompact(r *proto.CompactReader) error { return decodeI32(r, s) }

func (s *EmptyStruct) EncodeBinary(w *proto.BinaryWriter) error {
	w.WriteStructBegin()
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (s *EmptyStruct) EncodeCompact(w *proto.CompactWriter) error {
	w.WriteStructBegin()
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (s *EmptyStruct) DecodeBinary(r *proto.BinaryReader) error {
	return decodeI32(r, &I32Struct{ID: -1})
}

func (s *EmptyStruct) DecodeCompact(r *proto.CompactReader) error {
	return decodeI32(r, &I32Struct{ID: -1})
}
