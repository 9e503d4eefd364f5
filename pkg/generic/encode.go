package generic

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// ErrBadValue matches every ValueError.
var ErrBadValue = errors.New("generic: value does not match the IDL")

// ValueError says where a JSON or map value does not match the IDL: Path
// is the field path from the root ("args.req.items[3].name").
type ValueError struct {
	Path string
	Msg  string
}

func (e *ValueError) Error() string { return e.Path + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrBadValue) true.
func (e *ValueError) Unwrap() error { return ErrBadValue }

// writer is what proto.BinaryWriter and proto.CompactWriter share.
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

// wireType is the Thrift wire type of an IDL type.
func wireType(t *idl.Type) proto.Type {
	switch t.TrueType().Kind {
	case idl.KindBool:
		return proto.BOOL
	case idl.KindI8:
		return proto.I8
	case idl.KindI16:
		return proto.I16
	case idl.KindI32, idl.KindEnum:
		return proto.I32
	case idl.KindI64:
		return proto.I64
	case idl.KindDouble:
		return proto.DOUBLE
	case idl.KindString, idl.KindBinary:
		return proto.STRING
	case idl.KindUUID:
		return proto.UUID
	case idl.KindList:
		return proto.LIST
	case idl.KindSet:
		return proto.SET
	case idl.KindMap:
		return proto.MAP
	case idl.KindStruct:
		return proto.STRUCT
	}
	return proto.STOP
}

// encoder writes JSON-shaped values (what encoding/json decodes with
// UseNumber, or what a caller builds as map[string]any) as the IDL says,
// checking each against its type.
type encoder struct {
	w   writer
	lim *proto.Limits
	// b64 keeps large base64 strings decoded by a body's check for its
	// encode, so a big binary is decoded once.
	b64 map[string][]byte
}

// b64Cached is the length from which decoded base64 is kept.
const b64Cached = 4 << 10

// nullWriter writes nothing: check encodes through it to find mismatches
// without building a message.
type nullWriter struct{}

func (nullWriter) WriteStructBegin()                    {}
func (nullWriter) WriteStructEnd()                      {}
func (nullWriter) WriteFieldBegin(proto.Type, int16)    {}
func (nullWriter) WriteFieldStop()                      {}
func (nullWriter) WriteBool(bool)                       {}
func (nullWriter) WriteI8(int8)                         {}
func (nullWriter) WriteI16(int16)                       {}
func (nullWriter) WriteI32(int32)                       {}
func (nullWriter) WriteI64(int64)                       {}
func (nullWriter) WriteDouble(float64)                  {}
func (nullWriter) WriteString(string)                   {}
func (nullWriter) WriteBinary([]byte)                   {}
func (nullWriter) WriteUUID([16]byte)                   {}
func (nullWriter) WriteListBegin(proto.Type, int)       {}
func (nullWriter) WriteSetBegin(proto.Type, int)        {}
func (nullWriter) WriteMapBegin(_, _ proto.Type, _ int) {}

func (e *encoder) bad(path, format string, args ...any) error {
	return &ValueError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// kind names a value's JSON type for messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "number"
	case string:
		return "string"
	case []byte:
		return "bytes"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func (e *encoder) want(path, what string, v any) error {
	return e.bad(path, "want %s, got %s", what, kind(v))
}

// structFields writes the fields of s from obj, in IDL order.
func (e *encoder) structFields(s *idl.Struct, obj map[string]any, path string, depth int) error {
	if depth > e.lim.MaxDepth {
		return e.bad(path, "nesting deeper than %d", e.lim.MaxDepth)
	}
	byName := make(map[string]*idl.Field, len(s.Fields))
	for _, f := range s.Fields {
		byName[f.Name] = f
	}
	var unknown []string
	for k := range obj {
		if byName[k] == nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		names := make([]string, 0, len(s.Fields))
		for _, f := range s.Fields {
			names = append(names, f.Name)
		}
		return e.bad(path, "unknown field %q (%s has %s)", unknown[0], s.Name, strings.Join(names, ", "))
	}
	set := 0
	e.w.WriteStructBegin()
	for _, f := range s.Fields {
		v, ok := obj[f.Name]
		fp := path + "." + f.Name
		if !ok || v == nil {
			if f.Req == idl.Required {
				return e.bad(fp, "required field missing")
			}
			continue
		}
		set++
		e.w.WriteFieldBegin(wireType(f.Type), int16(f.ID))
		if err := e.value(v, f.Type, fp, depth+1); err != nil {
			return err
		}
	}
	if s.Kind == idl.StructKindUnion && set != 1 {
		return e.bad(path, "union %s needs exactly one field set, has %d", s.Name, set)
	}
	e.w.WriteFieldStop()
	e.w.WriteStructEnd()
	return nil
}

func (e *encoder) value(v any, t *idl.Type, path string, depth int) error {
	tt := t.TrueType()
	switch tt.Kind {
	case idl.KindBool:
		b, ok := v.(bool)
		if !ok {
			return e.want(path, "bool", v)
		}
		e.w.WriteBool(b)
	case idl.KindI8:
		n, err := e.integer(v, path, "i8", math.MinInt8, math.MaxInt8)
		if err != nil {
			return err
		}
		e.w.WriteI8(int8(n))
	case idl.KindI16:
		n, err := e.integer(v, path, "i16", math.MinInt16, math.MaxInt16)
		if err != nil {
			return err
		}
		e.w.WriteI16(int16(n))
	case idl.KindI32:
		n, err := e.integer(v, path, "i32", math.MinInt32, math.MaxInt32)
		if err != nil {
			return err
		}
		e.w.WriteI32(int32(n))
	case idl.KindI64:
		n, err := e.integer(v, path, "i64", math.MinInt64, math.MaxInt64)
		if err != nil {
			return err
		}
		e.w.WriteI64(n)
	case idl.KindEnum:
		n, err := e.enum(v, tt.Enum, path)
		if err != nil {
			return err
		}
		e.w.WriteI32(n)
	case idl.KindDouble:
		f, err := e.double(v, path)
		if err != nil {
			return err
		}
		e.w.WriteDouble(f)
	case idl.KindString:
		s, ok := v.(string)
		if !ok {
			return e.want(path, "string", v)
		}
		if len(s) > e.lim.MaxStringLength {
			return e.bad(path, "string of %d bytes, over the limit of %d", len(s), e.lim.MaxStringLength)
		}
		e.w.WriteString(s)
	case idl.KindBinary:
		b, err := e.binary(v, path)
		if err != nil {
			return err
		}
		e.w.WriteBinary(b)
	case idl.KindUUID:
		s, ok := v.(string)
		if !ok {
			return e.want(path, "uuid string", v)
		}
		u, err := parseUUID(s)
		if err != nil {
			return e.bad(path, "%v", err)
		}
		e.w.WriteUUID(u)
	case idl.KindList, idl.KindSet:
		return e.list(v, tt, path, depth)
	case idl.KindMap:
		return e.mapValue(v, tt, path, depth)
	case idl.KindStruct:
		obj, ok := stringMap(v)
		if !ok {
			return e.want(path, "object", v)
		}
		return e.structFields(tt.Struct, obj, path, depth)
	default:
		return e.bad(path, "type %s cannot hold a value", t.Name)
	}
	return nil
}

func (e *encoder) integer(v any, path, typ string, lo, hi int64) (int64, error) {
	var n int64
	switch x := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(string(x), 64)
			if ferr != nil || f != math.Trunc(f) {
				return 0, e.bad(path, "want %s, got %s", typ, x)
			}
			return 0, e.bad(path, "%s out of range for %s", x, typ)
		}
		n = i
	case string:
		// Strings carry i64 values a JSON number cannot hold exactly in
		// every reader (beyond 2^53).
		i, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, e.bad(path, "want %s, got string %q", typ, x)
		}
		n = i
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
			return 0, e.bad(path, "want %s, got %v", typ, x)
		}
		if x < -(1<<63) || x >= 1<<63 {
			return 0, e.bad(path, "%v out of range for %s", x, typ)
		}
		n = int64(x)
	case int:
		n = int64(x)
	case int8:
		n = int64(x)
	case int16:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint8:
		n = int64(x)
	case uint16:
		n = int64(x)
	case uint32:
		n = int64(x)
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, e.bad(path, "%d out of range for %s", x, typ)
		}
		n = int64(x)
	case uint64:
		if x > math.MaxInt64 {
			return 0, e.bad(path, "%d out of range for %s", x, typ)
		}
		n = int64(x)
	default:
		return 0, e.want(path, typ, v)
	}
	if n < lo || n > hi {
		return 0, e.bad(path, "%d out of range for %s", n, typ)
	}
	return n, nil
}

func (e *encoder) enum(v any, en *idl.Enum, path string) (int32, error) {
	if s, ok := v.(string); ok {
		for _, ev := range en.Values {
			if ev.Name == s {
				return int32(ev.Value), nil
			}
		}
		if _, err := strconv.ParseInt(s, 10, 32); err != nil {
			return 0, e.bad(path, "%q is not a value of enum %s (%s)", s, en.Name, enumNames(en))
		}
	}
	// Thrift enums are open: a number the IDL does not declare (a newer
	// peer's, which Call returns as a number) passes, as in generated code.
	n, err := e.integer(v, path, "enum "+en.Name, math.MinInt32, math.MaxInt32)
	return int32(n), err
}

func enumNames(en *idl.Enum) string {
	var parts []string
	for _, ev := range en.Values {
		parts = append(parts, fmt.Sprintf("%s=%d", ev.Name, ev.Value))
	}
	return strings.Join(parts, ", ")
}

func (e *encoder) double(v any, path string) (float64, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, e.bad(path, "want double, got %s", x)
		}
		return f, nil
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case string:
		// JSON has no NaN or infinities; they travel as these strings.
		switch x {
		case "NaN":
			return math.NaN(), nil
		case "Infinity", "+Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return 0, e.bad(path, "want double, got string %q", x)
	}
	n, err := e.integer(v, path, "double", math.MinInt64, math.MaxInt64)
	return float64(n), err
}

func (e *encoder) binary(v any, path string) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		if len(x) > e.lim.MaxStringLength {
			return nil, e.bad(path, "binary of %d bytes, over the limit of %d", len(x), e.lim.MaxStringLength)
		}
		return x, nil
	case string:
		if len(x) > base64.StdEncoding.EncodedLen(e.lim.MaxStringLength) {
			return nil, e.bad(path, "binary of more than %d bytes, over the limit", e.lim.MaxStringLength)
		}
		if b, ok := e.b64[x]; ok {
			return b, nil
		}
		b, err := base64.StdEncoding.DecodeString(x)
		if err != nil {
			var err2 error
			if b, err2 = base64.RawStdEncoding.DecodeString(x); err2 != nil {
				return nil, e.bad(path, "want base64, got %q: %v", abbreviate(x), err)
			}
		}
		if len(b) > e.lim.MaxStringLength {
			return nil, e.bad(path, "binary of %d bytes, over the limit of %d", len(b), e.lim.MaxStringLength)
		}
		if e.b64 != nil && len(x) >= b64Cached {
			e.b64[x] = b
		}
		return b, nil
	}
	return nil, e.want(path, "base64 string", v)
}

func abbreviate(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// elems returns the elements of a JSON array or any Go slice but []byte.
func elems(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case []byte, string, nil:
		return nil, false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

func (e *encoder) list(v any, t *idl.Type, path string, depth int) error {
	if depth > e.lim.MaxDepth {
		return e.bad(path, "nesting deeper than %d", e.lim.MaxDepth)
	}
	items, ok := elems(v)
	if !ok {
		return e.want(path, "array", v)
	}
	if len(items) > e.lim.MaxContainerSize {
		return e.bad(path, "%d elements, over the limit of %d", len(items), e.lim.MaxContainerSize)
	}
	et := wireType(t.Elem)
	if t.Kind == idl.KindSet {
		e.w.WriteSetBegin(et, len(items))
	} else {
		e.w.WriteListBegin(et, len(items))
	}
	for i, it := range items {
		if err := e.value(it, t.Elem, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
			return err
		}
	}
	return nil
}

// mapValue takes a JSON object (keys as strings, parsed by the key type)
// or an array of {"key": k, "value": v} pairs (any key type).
func (e *encoder) mapValue(v any, t *idl.Type, path string, depth int) error {
	if depth > e.lim.MaxDepth {
		return e.bad(path, "nesting deeper than %d", e.lim.MaxDepth)
	}
	kt, vt := wireType(t.Key), wireType(t.Elem)
	if obj, ok := stringMap(v); ok {
		if len(obj) > e.lim.MaxContainerSize {
			return e.bad(path, "%d entries, over the limit of %d", len(obj), e.lim.MaxContainerSize)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys) // a stable encoding for the same input
		e.w.WriteMapBegin(kt, vt, len(keys))
		for _, k := range keys {
			kp := path + "[" + strconv.Quote(k) + "]"
			kv, err := keyFromString(k, t.Key)
			if err != nil {
				return e.bad(kp, "key: %v", err)
			}
			if err := e.value(kv, t.Key, kp, depth+1); err != nil {
				return err
			}
			if err := e.value(obj[k], t.Elem, kp, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	items, ok := elems(v)
	if !ok {
		return e.want(path, `object or array of {"key","value"}`, v)
	}
	if len(items) > e.lim.MaxContainerSize {
		return e.bad(path, "%d entries, over the limit of %d", len(items), e.lim.MaxContainerSize)
	}
	e.w.WriteMapBegin(kt, vt, len(items))
	for i, it := range items {
		ip := path + "[" + strconv.Itoa(i) + "]"
		pair, ok := it.(map[string]any)
		if !ok {
			return e.want(ip, `{"key","value"} object`, it)
		}
		k, hasK := pair["key"]
		val, hasV := pair["value"]
		if !hasK || !hasV || len(pair) != 2 {
			return e.bad(ip, `want exactly "key" and "value"`)
		}
		if err := e.value(k, t.Key, ip+".key", depth+1); err != nil {
			return err
		}
		if err := e.value(val, t.Elem, ip+".value", depth+1); err != nil {
			return err
		}
	}
	return nil
}

// stringMap returns a JSON object, or any Go map with string keys (a
// map[string][]byte a caller of Call built), as map[string]any.
func stringMap(v any) (map[string]any, bool) {
	if obj, ok := v.(map[string]any); ok {
		return obj, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
		return nil, false
	}
	out := make(map[string]any, rv.Len())
	for it := rv.MapRange(); it.Next(); {
		out[it.Key().String()] = it.Value().Interface()
	}
	return out, true
}

// keyFromString turns an object key back into a value of the key type.
func keyFromString(k string, t *idl.Type) (any, error) {
	switch t.TrueType().Kind {
	case idl.KindString, idl.KindBinary, idl.KindUUID, idl.KindEnum:
		return k, nil
	case idl.KindI8, idl.KindI16, idl.KindI32, idl.KindI64:
		return json.Number(k), nil
	case idl.KindBool:
		b, err := strconv.ParseBool(k)
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", k)
		}
		return b, nil
	case idl.KindDouble:
		return json.Number(k), nil
	}
	return nil, fmt.Errorf(`a %s key needs the array of {"key","value"} form`, t.Name)
}

// objectKeys reports whether a map with keys of type t is rendered as a
// JSON object (keys as strings) rather than an array of pairs.
func objectKeys(t *idl.Type) bool {
	switch t.TrueType().Kind {
	case idl.KindString, idl.KindBinary, idl.KindUUID, idl.KindEnum, idl.KindBool,
		idl.KindI8, idl.KindI16, idl.KindI32, idl.KindI64:
		return true
	}
	return false
}

func parseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("want a uuid like 00112233-4455-6677-8899-aabbccddeeff, got %q", abbreviate(s))
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, fmt.Errorf("want a uuid like 00112233-4455-6677-8899-aabbccddeeff, got %q", abbreviate(s))
	}
	return u, nil
}

func formatUUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
