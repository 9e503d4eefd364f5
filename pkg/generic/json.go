package generic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/hatrpc/hatrpc/pkg/idl"
)

// parseJSON reads exactly one JSON value, keeping numbers as json.Number so
// that every i64 arrives exact.
func parseJSON(path string, data []byte) (any, error) {
	if s, ok := plainString(data); ok {
		return s, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &ValueError{Path: path, Msg: "invalid JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ValueError{Path: path, Msg: "invalid JSON: more than one value"}
	}
	return v, nil
}

// plainString is the fast path for a result that is one JSON string
// without escapes, e.g. a large binary in base64, which encoding/json
// would scan twice and copy.
func plainString(data []byte) (string, bool) {
	data = bytes.TrimSpace(data)
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return "", false
	}
	in := data[1 : len(data)-1]
	if bytes.IndexByte(in, '"') >= 0 || bytes.IndexByte(in, '\\') >= 0 {
		return "", false
	}
	for _, c := range in {
		if c < 0x20 || c >= utf8.RuneSelf {
			return "", false // control characters are invalid; leave UTF-8 checks to encoding/json
		}
	}
	return string(in), true
}

// appendJSON renders a decoded value of type t: struct fields in IDL
// order, i64 as exact integers, binary as base64, doubles that JSON cannot
// hold as "NaN", "Infinity", "-Infinity".
func appendJSON(buf []byte, v any, t *idl.Type) []byte {
	if v == nil {
		return append(buf, "null"...)
	}
	tt := t.TrueType()
	switch x := v.(type) {
	case bool:
		return strconv.AppendBool(buf, x)
	case int8:
		return strconv.AppendInt(buf, int64(x), 10)
	case int16:
		return strconv.AppendInt(buf, int64(x), 10)
	case int32:
		return strconv.AppendInt(buf, int64(x), 10)
	case int64:
		return strconv.AppendInt(buf, x, 10)
	case float64:
		switch {
		case math.IsNaN(x):
			return append(buf, `"NaN"`...)
		case math.IsInf(x, 1):
			return append(buf, `"Infinity"`...)
		case math.IsInf(x, -1):
			return append(buf, `"-Infinity"`...)
		}
		return strconv.AppendFloat(buf, x, 'g', -1, 64)
	case string:
		return appendString(buf, x)
	case []byte:
		buf = append(buf, '"')
		buf = base64.StdEncoding.AppendEncode(buf, x)
		return append(buf, '"')
	case map[string]any:
		if tt.Kind == idl.KindStruct {
			buf = append(buf, '{')
			first := true
			for _, f := range tt.Struct.Fields {
				fv, ok := x[f.Name]
				if !ok {
					continue
				}
				if !first {
					buf = append(buf, ',')
				}
				first = false
				buf = appendString(buf, f.Name)
				buf = append(buf, ':')
				buf = appendJSON(buf, fv, f.Type)
			}
			return append(buf, '}')
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, k)
			buf = append(buf, ':')
			buf = appendJSON(buf, x[k], tt.Elem)
		}
		return append(buf, '}')
	case []any:
		buf = append(buf, '[')
		for i, it := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			if tt.Kind == idl.KindMap {
				p := it.(map[string]any)
				buf = append(buf, `{"key":`...)
				buf = appendJSON(buf, p["key"], tt.Key)
				buf = append(buf, `,"value":`...)
				buf = appendJSON(buf, p["value"], tt.Elem)
				buf = append(buf, '}')
				continue
			}
			buf = appendJSON(buf, it, tt.Elem)
		}
		return append(buf, ']')
	}
	// The decoder makes only the types above; anything else would be a bug
	// here, rendered visibly rather than crashing a server.
	return appendString(buf, fmt.Sprintf("<%T>", v))
}

func appendString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(buf, b...)
}
