// Package wiretest holds hand-written proto.Struct types that the runtime's
// tests and benchmarks use in place of generated code.
package wiretest

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Modes tell the test echo handler how to misbehave.
const (
	ModeEcho     int32 = iota
	ModePanic          // handler panics
	ModeDeclared       // handler fails with the declared EchoError
	ModePlain          // handler fails with a plain error
	ModeAppExc         // handler returns a *proto.ApplicationException
	ModeWaitCtx        // handler blocks until its context ends
	ModeNoResult       // handler returns (nil, nil)
	ModeRepeat         // handler answers Msg repeated RepeatTimes times
)

// RepeatTimes is how many times ModeRepeat repeats Msg: a small request
// gets a large reply.
const RepeatTimes = 1024

type writer interface {
	WriteStructBegin()
	WriteStructEnd()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteI32(v int32)
	WriteI64(v int64)
	WriteString(v string)
	WriteBinary(v []byte)
}

type reader interface {
	ReadStructBegin() error
	ReadStructEnd() error
	ReadFieldBegin() (proto.Type, int16, error)
	ReadI32() (int32, error)
	ReadI64() (int64, error)
	ReadString() (string, error)
	ReadBinary() ([]byte, error)
	Skip(t proto.Type) error
}

func fields(r reader, f func(t proto.Type, id int16) (bool, error)) error {
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
		ok, err := f(t, id)
		if err != nil {
			return err
		}
		if !ok {
			if err := r.Skip(t); err != nil {
				return err
			}
		}
	}
}

// EchoArgs: 1: string msg, 2: i64 delay_ns, 3: i32 mode, 4: binary blob.
type EchoArgs struct {
	Msg     string
	DelayNs int64
	Mode    int32
	Blob    []byte
}

func (a *EchoArgs) enc(w writer) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.STRING, 1)
	w.WriteString(a.Msg)
	if a.DelayNs != 0 {
		w.WriteFieldBegin(proto.I64, 2)
		w.WriteI64(a.DelayNs)
	}
	if a.Mode != 0 {
		w.WriteFieldBegin(proto.I32, 3)
		w.WriteI32(a.Mode)
	}
	if a.Blob != nil {
		w.WriteFieldBegin(proto.STRING, 4)
		w.WriteBinary(a.Blob)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (a *EchoArgs) dec(r reader) error {
	*a = EchoArgs{}
	return fields(r, func(t proto.Type, id int16) (bool, error) {
		var err error
		switch {
		case id == 1 && t == proto.STRING:
			a.Msg, err = r.ReadString()
		case id == 2 && t == proto.I64:
			a.DelayNs, err = r.ReadI64()
		case id == 3 && t == proto.I32:
			a.Mode, err = r.ReadI32()
		case id == 4 && t == proto.STRING:
			a.Blob, err = r.ReadBinary()
		default:
			return false, nil
		}
		return true, err
	})
}

func (a *EchoArgs) EncodeBinary(w *proto.BinaryWriter) error   { return a.enc(w) }
func (a *EchoArgs) EncodeCompact(w *proto.CompactWriter) error { return a.enc(w) }
func (a *EchoArgs) DecodeBinary(r *proto.BinaryReader) error   { return a.dec(r) }
func (a *EchoArgs) DecodeCompact(r *proto.CompactReader) error { return a.dec(r) }

// EchoError is the declared exception: 1: i32 code, 2: string why.
type EchoError struct {
	Code int32
	Why  string
}

func (e *EchoError) Error() string { return fmt.Sprintf("echo error %d: %s", e.Code, e.Why) }

func (e *EchoError) enc(w writer) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.I32, 1)
	w.WriteI32(e.Code)
	w.WriteFieldBegin(proto.STRING, 2)
	w.WriteString(e.Why)
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (e *EchoError) dec(r reader) error {
	*e = EchoError{}
	return fields(r, func(t proto.Type, id int16) (bool, error) {
		var err error
		switch {
		case id == 1 && t == proto.I32:
			e.Code, err = r.ReadI32()
		case id == 2 && t == proto.STRING:
			e.Why, err = r.ReadString()
		default:
			return false, nil
		}
		return true, err
	})
}

func (e *EchoError) EncodeBinary(w *proto.BinaryWriter) error   { return e.enc(w) }
func (e *EchoError) EncodeCompact(w *proto.CompactWriter) error { return e.enc(w) }
func (e *EchoError) DecodeBinary(r *proto.BinaryReader) error   { return e.dec(r) }
func (e *EchoError) DecodeCompact(r *proto.CompactReader) error { return e.dec(r) }

// EchoResult: 0: string success, 1: EchoError err (declared exception).
type EchoResult struct {
	Success *string
	Err     *EchoError
}

// ThrownException is what hatgen generates for a function with throws
// (proto.Thrower).
func (s *EchoResult) ThrownException() string {
	if s.Err != nil {
		return "EchoError"
	}
	return ""
}

func (s *EchoResult) enc(w writer) error {
	w.WriteStructBegin()
	if s.Success != nil {
		w.WriteFieldBegin(proto.STRING, 0)
		w.WriteString(*s.Success)
	}
	if s.Err != nil {
		w.WriteFieldBegin(proto.STRUCT, 1)
		if err := s.Err.enc(w); err != nil {
			return err
		}
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (s *EchoResult) dec(r reader) error {
	*s = EchoResult{}
	return fields(r, func(t proto.Type, id int16) (bool, error) {
		switch {
		case id == 0 && t == proto.STRING:
			v, err := r.ReadString()
			s.Success = &v
			return true, err
		case id == 1 && t == proto.STRUCT:
			s.Err = new(EchoError)
			return true, s.Err.dec(r)
		}
		return false, nil
	})
}

func (s *EchoResult) EncodeBinary(w *proto.BinaryWriter) error   { return s.enc(w) }
func (s *EchoResult) EncodeCompact(w *proto.CompactWriter) error { return s.enc(w) }
func (s *EchoResult) DecodeBinary(r *proto.BinaryReader) error   { return s.dec(r) }
func (s *EchoResult) DecodeCompact(r *proto.CompactReader) error { return s.dec(r) }

// Empty is a struct with no fields (oneway args, void results).
type Empty struct{}

func (Empty) enc(w writer) error {
	w.WriteStructBegin()
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (e *Empty) dec(r reader) error {
	return fields(r, func(proto.Type, int16) (bool, error) { return false, nil })
}

func (e *Empty) EncodeBinary(w *proto.BinaryWriter) error   { return e.enc(w) }
func (e *Empty) EncodeCompact(w *proto.CompactWriter) error { return e.enc(w) }
func (e *Empty) DecodeBinary(r *proto.BinaryReader) error   { return e.dec(r) }
func (e *Empty) DecodeCompact(r *proto.CompactReader) error { return e.dec(r) }
