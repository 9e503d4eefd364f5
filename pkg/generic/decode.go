package generic

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// reader is what proto.BinaryReader and proto.CompactReader share.
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

// decoder reads wire values into the values Call returns: map[string]any
// for structs (by field name), []any for lists and sets, map[string]any or
// []any of {"key","value"} for maps (see objectKeys), int8..int64, float64,
// string, []byte, enum names, uuid strings.
type decoder struct {
	r   reader
	lim *proto.Limits
	// borrow leaves binary values in the reader's buffer: for a server's
	// arguments, rendered as JSON before the call ends.
	borrow bool
}

func (d *decoder) depthErr() error {
	return &proto.DecodeError{Err: proto.ErrDepthLimit, Detail: "nesting deeper than " + strconv.Itoa(d.lim.MaxDepth)}
}

// structFields reads one struct as generated code does: fields the IDL
// does not know, or whose wire type differs from the IDL's, are skipped; a
// container whose element types differ fails.
func (d *decoder) structFields(s *idl.Struct, depth int) (map[string]any, error) {
	if depth > d.lim.MaxDepth {
		return nil, d.depthErr()
	}
	if err := d.r.ReadStructBegin(); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for {
		t, id, err := d.r.ReadFieldBegin()
		if err != nil {
			return nil, err
		}
		if t == proto.STOP {
			break
		}
		f := fieldByID(s, id)
		if f == nil || wireType(f.Type) != t {
			if err := d.r.Skip(t); err != nil {
				return nil, err
			}
			continue
		}
		v, err := d.value(f.Type, depth+1)
		if err != nil {
			return nil, err
		}
		out[f.Name] = v
	}
	if err := d.r.ReadStructEnd(); err != nil {
		return nil, err
	}
	for _, f := range s.Fields {
		if f.Req == idl.Required {
			if _, ok := out[f.Name]; !ok {
				return nil, proto.RequiredFieldError(s.Name, f.Name)
			}
		}
	}
	return out, nil
}

func fieldByID(s *idl.Struct, id int16) *idl.Field {
	for _, f := range s.Fields {
		if f.ID == int(id) {
			return f
		}
	}
	return nil
}

func (d *decoder) value(t *idl.Type, depth int) (any, error) {
	tt := t.TrueType()
	switch tt.Kind {
	case idl.KindBool:
		return d.r.ReadBool()
	case idl.KindI8:
		return d.r.ReadI8()
	case idl.KindI16:
		return d.r.ReadI16()
	case idl.KindI32:
		return d.r.ReadI32()
	case idl.KindI64:
		return d.r.ReadI64()
	case idl.KindEnum:
		n, err := d.r.ReadI32()
		if err != nil {
			return nil, err
		}
		return enumValue(tt.Enum, n), nil
	case idl.KindDouble:
		return d.r.ReadDouble()
	case idl.KindString:
		return d.r.ReadString()
	case idl.KindBinary:
		b, err := d.r.ReadBinary()
		if err != nil {
			return nil, err
		}
		if d.borrow {
			return b, nil
		}
		return append([]byte{}, b...), nil // never alias the caller's buffer
	case idl.KindUUID:
		u, err := d.r.ReadUUID()
		if err != nil {
			return nil, err
		}
		return formatUUID(u), nil
	case idl.KindList, idl.KindSet:
		return d.list(tt, depth)
	case idl.KindMap:
		return d.mapValue(tt, depth)
	case idl.KindStruct:
		return d.structFields(tt.Struct, depth)
	}
	return nil, &proto.DecodeError{Err: proto.ErrBadType, Detail: "type " + t.Name + " holds no value"}
}

// enumValue is the name of n in en, or n itself for a value the IDL does
// not declare (a newer peer's), so nothing is lost.
func enumValue(en *idl.Enum, n int32) any {
	for _, ev := range en.Values {
		if ev.Value == int64(n) {
			return ev.Name
		}
	}
	return n
}

func (d *decoder) list(t *idl.Type, depth int) (any, error) {
	if depth > d.lim.MaxDepth {
		return nil, d.depthErr()
	}
	var et proto.Type
	var n int
	var err error
	if t.Kind == idl.KindSet {
		et, n, err = d.r.ReadSetBegin()
	} else {
		et, n, err = d.r.ReadListBegin()
	}
	if err != nil {
		return nil, err
	}
	if want := wireType(t.Elem); n > 0 && et != want {
		return nil, fmt.Errorf("%w: element type %v, want %v", proto.ErrBadType, et, want)
	}
	out := make([]any, 0, min(n, 1024)) // n is bounded by the reader; grow as elements really arrive
	for i := 0; i < n; i++ {
		v, err := d.value(t.Elem, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (d *decoder) mapValue(t *idl.Type, depth int) (any, error) {
	if depth > d.lim.MaxDepth {
		return nil, d.depthErr()
	}
	kt, vt, n, err := d.r.ReadMapBegin()
	if err != nil {
		return nil, err
	}
	wk, wv := wireType(t.Key), wireType(t.Elem)
	if n > 0 && (kt != wk || vt != wv) {
		return nil, fmt.Errorf("%w: map types %v/%v, want %v/%v", proto.ErrBadType, kt, vt, wk, wv)
	}
	asObject := objectKeys(t.Key)
	var obj map[string]any
	var pairs []any
	if asObject {
		obj = make(map[string]any, min(n, 1024))
	} else {
		pairs = make([]any, 0, min(n, 1024))
	}
	for i := 0; i < n; i++ {
		k, err := d.value(t.Key, depth+1)
		if err != nil {
			return nil, err
		}
		v, err := d.value(t.Elem, depth+1)
		if err != nil {
			return nil, err
		}
		if asObject {
			obj[keyString(k)] = v
		} else {
			pairs = append(pairs, map[string]any{"key": k, "value": v})
		}
	}
	if asObject {
		return obj, nil
	}
	return pairs, nil
}

// keyString renders a decoded key of an objectKeys type as an object key.
func keyString(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case bool:
		return strconv.FormatBool(x)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}
