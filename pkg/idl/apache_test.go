package idl

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stretchr/testify/require"
)

// The shape of `thrift --gen json` output that the comparison needs.
type ajType struct {
	TypeID      string  `json:"typeId"`
	Class       string  `json:"class"`
	ElemTypeID  string  `json:"elemTypeId"`
	ElemType    *ajType `json:"elemType"`
	KeyTypeID   string  `json:"keyTypeId"`
	KeyType     *ajType `json:"keyType"`
	ValueTypeID string  `json:"valueTypeId"`
	ValueType   *ajType `json:"valueType"`
}

type ajField struct {
	Key      int     `json:"key"`
	Name     string  `json:"name"`
	TypeID   string  `json:"typeId"`
	Type     *ajType `json:"type"`
	Required string  `json:"required"`
	Default  any     `json:"default"`
	Doc      string  `json:"doc"`
}

type ajProgram struct {
	Namespaces map[string]string `json:"namespaces"`
	Enums      []struct {
		Name    string `json:"name"`
		Doc     string `json:"doc"`
		Members []struct {
			Name  string `json:"name"`
			Value int64  `json:"value"`
		} `json:"members"`
	} `json:"enums"`
	Typedefs []struct {
		Name   string  `json:"name"`
		TypeID string  `json:"typeId"`
		Type   *ajType `json:"type"`
		Doc    string  `json:"doc"`
	} `json:"typedefs"`
	Structs []struct {
		Name        string    `json:"name"`
		Doc         string    `json:"doc"`
		IsException bool      `json:"isException"`
		IsUnion     bool      `json:"isUnion"`
		Fields      []ajField `json:"fields"`
	} `json:"structs"`
	Constants []struct {
		Name  string `json:"name"`
		Value any    `json:"value"`
		Doc   string `json:"doc"`
	} `json:"constants"`
	Services []struct {
		Name      string `json:"name"`
		Doc       string `json:"doc"`
		Extends   string `json:"extends"`
		Functions []struct {
			Name         string    `json:"name"`
			ReturnTypeID string    `json:"returnTypeId"`
			ReturnType   *ajType   `json:"returnType"`
			Oneway       bool      `json:"oneway"`
			Doc          string    `json:"doc"`
			Arguments    []ajField `json:"arguments"`
			Exceptions   []ajField `json:"exceptions"`
		} `json:"functions"`
	} `json:"services"`
}

func lastDot(s string) string { return s[strings.LastIndexByte(s, '.')+1:] }

// ajTypeString renders an Apache JSON type canonically.
func ajTypeString(id string, t *ajType) string {
	if t != nil && t.TypeID != "" {
		id = t.TypeID
	}
	switch id {
	case "list", "set":
		return id + "<" + ajTypeString(t.ElemTypeID, t.ElemType) + ">"
	case "map":
		return "map<" + ajTypeString(t.KeyTypeID, t.KeyType) + "," + ajTypeString(t.ValueTypeID, t.ValueType) + ">"
	case "struct", "union", "exception":
		return id + ":" + lastDot(t.Class)
	}
	return id
}

// myTypeString renders a resolved model type the same way; typedefs
// disappear and enums are i32, as in Apache's JSON.
func myTypeString(t *Type) string {
	t = t.TrueType()
	switch t.Kind {
	case KindList:
		return "list<" + myTypeString(t.Elem) + ">"
	case KindSet:
		return "set<" + myTypeString(t.Elem) + ">"
	case KindMap:
		return "map<" + myTypeString(t.Key) + "," + myTypeString(t.Elem) + ">"
	case KindStruct:
		return [...]string{"struct", "union", "exception"}[t.Struct.Kind] + ":" + t.Struct.Name
	case KindEnum:
		return "i32"
	}
	return map[TypeKind]string{KindBool: "bool", KindI8: "i8", KindI16: "i16", KindI32: "i32", KindI64: "i64",
		KindDouble: "double", KindString: "string", KindBinary: "binary", KindUUID: "uuid"}[t.Kind]
}

// canon makes JSON-decoded values and model constants comparable: maps
// become sorted key/value pairs, numbers float64, and an empty map equals
// an empty list (Apache keeps `{}` for an empty set).
func canon(v any) any {
	switch x := v.(type) {
	case map[string]any:
		pairs := make([]any, 0, len(x))
		for k, e := range x {
			pairs = append(pairs, []any{k, canon(e)})
		}
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].([]any)[0].(string) < pairs[j].([]any)[0].(string) })
		if len(pairs) == 0 {
			return "empty"
		}
		return pairs
	case []any:
		if len(x) == 0 {
			return "empty"
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canon(e)
		}
		return out
	case bool:
		if x {
			return 1.0
		}
		return 0.0
	}
	return v
}

func constJSON(v *ConstValue) any {
	switch {
	case v.EnumValue != nil:
		return float64(v.EnumValue.Value)
	case v.Const != nil:
		return constJSON(v.Const.Value)
	}
	switch v.Kind {
	case ConstInt:
		return float64(v.Int)
	case ConstDouble:
		return v.Double
	case ConstString:
		return v.String
	case ConstList:
		out := make([]any, len(v.List))
		for i, e := range v.List {
			out[i] = constJSON(e)
		}
		return out
	case ConstMap:
		out := map[string]any{}
		for _, p := range v.Map {
			k := constJSON(p.Key)
			if f, ok := k.(float64); ok {
				k = strconv.FormatFloat(f, 'g', -1, 64)
			}
			out[fmt.Sprint(k)] = constJSON(p.Value)
		}
		return out
	}
	return nil
}

func doc(s string) string { return strings.TrimRight(s, "\n") }

func compareFields(t *testing.T, what string, want []ajField, got []*Field, checkReq bool, union bool) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i, w := range want {
		g := got[i]
		at := what + "." + w.Name
		assert.Equal(t, w.Key, g.ID, at)
		assert.Equal(t, w.Name, g.Name, at)
		assert.Equal(t, ajTypeString(w.TypeID, w.Type), myTypeString(g.Type), at)
		assert.Equal(t, doc(w.Doc), g.Doc, at)
		if checkReq {
			req := [...]string{"req_out", "required", "optional"}[g.Req]
			if union {
				req = "optional" // Apache marks every union member optional
			}
			assert.Equal(t, w.Required, req, at)
		}
		if w.Default != nil {
			require.NotNil(t, g.Default, at)
			assert.Equal(t, canon(w.Default), canon(constJSON(g.Default)), at)
		} else {
			assert.Nil(t, g.Default, at)
		}
	}
}

// TestMatchesApacheCompiler checks the resolved model against the JSON the
// reference Apache compiler emits for the same files (testdata/apache-json).
func TestMatchesApacheCompiler(t *testing.T) {
	files := map[string]string{
		"ThriftTest.json": filepath.Join(sharedIDL(t), "apache/thrift/test/v0.16/ThriftTest.thrift"),
		"Include.json":    filepath.Join(sharedIDL(t), "apache/thrift/test/Include.thrift"),
		"tutorial.json":   filepath.Join(sharedIDL(t), "apache/thrift/tutorial/tutorial.thrift"),
		"shared.json":     filepath.Join(sharedIDL(t), "apache/thrift/tutorial/shared.thrift"),
		"fb303.json":      filepath.Join(sharedIDL(t), "apache/thrift/contrib/fb303/if/fb303.thrift"),
		"parquet.json":    filepath.Join(sharedIDL(t), "apache/parquet-format/src/main/thrift/parquet.thrift"),
		"jaeger.json":     filepath.Join(sharedIDL(t), "jaegertracing/jaeger-idl/thrift/jaeger.thrift"),
		"plain.json":      "testdata/constructs/plain.thrift",
	}
	for js, idlFile := range files {
		t.Run(js, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata/apache-json", js))
			require.NoError(t, err)
			var want ajProgram
			require.NoError(t, json.Unmarshal(raw, &want))
			p, _, err := Load(idlFile, []string{"testdata/constructs/incdir"})
			require.NoError(t, err)

			if want.Namespaces == nil {
				want.Namespaces = map[string]string{}
			}
			assert.Equal(t, want.Namespaces, p.Namespaces)
			require.Len(t, p.Enums, len(want.Enums))
			for i, we := range want.Enums {
				e := p.Enums[i]
				assert.Equal(t, we.Name, e.Name)
				assert.Equal(t, doc(we.Doc), e.Doc, e.Name)
				require.Len(t, e.Values, len(we.Members), e.Name)
				for j, m := range we.Members {
					assert.Equal(t, m.Name, e.Values[j].Name)
					assert.Equal(t, m.Value, e.Values[j].Value, m.Name)
				}
			}
			require.Len(t, p.Typedefs, len(want.Typedefs))
			for i, wt := range want.Typedefs {
				td := p.Typedefs[i]
				assert.Equal(t, wt.Name, td.Name)
				assert.Equal(t, ajTypeString(wt.TypeID, wt.Type), myTypeString(td.Type), td.Name)
				assert.Equal(t, doc(wt.Doc), td.Doc, td.Name)
			}
			require.Len(t, p.Structs, len(want.Structs))
			for i, ws := range want.Structs {
				s := p.Structs[i]
				assert.Equal(t, ws.Name, s.Name)
				assert.Equal(t, ws.IsException, s.Kind == StructKindException, s.Name)
				assert.Equal(t, ws.IsUnion, s.Kind == StructKindUnion, s.Name)
				assert.Equal(t, doc(ws.Doc), s.Doc, s.Name)
				compareFields(t, s.Name, ws.Fields, s.Fields, true, ws.IsUnion)
			}
			require.Len(t, p.Consts, len(want.Constants))
			for i, wc := range want.Constants {
				c := p.Consts[i]
				assert.Equal(t, wc.Name, c.Name)
				assert.Equal(t, doc(wc.Doc), c.Doc, c.Name)
				assert.Equal(t, canon(wc.Value), canon(constJSON(c.Value)), c.Name)
			}
			require.Len(t, p.Services, len(want.Services))
			for i, wsvc := range want.Services {
				s := p.Services[i]
				assert.Equal(t, wsvc.Name, s.Name)
				assert.Equal(t, doc(wsvc.Doc), s.Doc, s.Name)
				if wsvc.Extends != "" {
					require.NotNil(t, s.Extends, s.Name)
					assert.Equal(t, lastDot(wsvc.Extends), s.Extends.Name)
				}
				require.Len(t, s.Functions, len(wsvc.Functions), s.Name)
				for j, wf := range wsvc.Functions {
					f := s.Functions[j]
					at := s.Name + "." + wf.Name
					assert.Equal(t, wf.Name, f.Name)
					assert.Equal(t, wf.Oneway, f.Oneway, at)
					assert.Equal(t, doc(wf.Doc), f.Doc, at)
					if wf.ReturnTypeID == "void" {
						assert.Nil(t, f.Returns, at)
					} else {
						require.NotNil(t, f.Returns, at)
						assert.Equal(t, ajTypeString(wf.ReturnTypeID, wf.ReturnType), myTypeString(f.Returns), at)
					}
					compareFields(t, at+"(args)", wf.Arguments, f.Args, false, false)
					compareFields(t, at+"(throws)", wf.Exceptions, f.Throws, false, false)
				}
			}
		})
	}
}
