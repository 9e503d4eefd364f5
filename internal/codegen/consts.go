package codegen

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/idl"
)

// genConst renders a constant: scalars as Go consts, everything Go cannot
// express as a constant (binary, uuid, containers, structs) as vars.
func (g *generator) genConst(c *idl.Const) {
	name := publicize(c.Name)
	g.e.buf.WriteString(comment(c.Doc))
	val := g.constValue(c.Type, c.Value, c.Program)
	switch k := trueKind(c.Type); {
	case k == idl.KindEnum && c.Type.Kind == idl.KindEnum:
		g.e.p("const %s = %s", name, val)
	case isScalar(c.Type) && k != idl.KindUUID:
		if isNamed(c.Type) {
			g.e.p("const %s %s = %s", name, g.goType(c.Type, c.Program), val)
		} else {
			g.e.p("const %s = %s", name, val)
		}
	default:
		g.e.p("var %s = %s", name, val)
	}
	g.e.p("")
}

// constValue renders v as a Go expression of the Go type of t.
func (g *generator) constValue(t *idl.Type, v *idl.ConstValue, owner *idl.Program) string {
	for v.Kind == idl.ConstIdent && v.Const != nil {
		// A reference to another constant is inlined: the referenced Go
		// constant may be untyped or of a different (typedef'd) type.
		v = v.Const.Value
	}
	tt, towner := resolve(t, owner)
	switch tt.Kind {
	case idl.KindStruct:
		return g.structConst(t, tt.Struct, v, towner)
	case idl.KindList, idl.KindSet:
		var b strings.Builder
		b.WriteString(g.goType(t, owner) + "{\n")
		for _, e := range v.List {
			b.WriteString(g.constValue(tt.Elem, e, towner) + ",\n")
		}
		b.WriteString("}")
		return b.String()
	case idl.KindMap:
		var b strings.Builder
		b.WriteString(g.goType(t, owner) + "{\n")
		entries := needsEntries(tt.Key)
		for _, kv := range v.Map {
			if entries {
				fmt.Fprintf(&b, "{Key: %s, Value: %s},\n", g.constValue(tt.Key, kv.Key, towner), g.constValue(tt.Elem, kv.Value, towner))
				continue
			}
			k := g.constValue(tt.Key, kv.Key, towner)
			if trueKind(tt.Key) == idl.KindBinary {
				k = strconv.Quote(kv.Key.String)
			}
			fmt.Fprintf(&b, "%s: %s,\n", k, g.constValue(tt.Elem, kv.Value, towner))
		}
		b.WriteString("}")
		return b.String()
	case idl.KindEnum:
		if v.Kind == idl.ConstIdent && v.EnumValue != nil {
			ev := v.EnumValue
			s := g.qual(ev.Enum.Program, publicize(ev.Enum.Name)+"_"+ev.Name)
			if t.Kind == idl.KindTypedef {
				s = g.goType(t, owner) + "(" + s + ")"
			}
			return s
		}
		for _, ev := range tt.Enum.Values {
			if ev.Value == v.Int && t.Kind == idl.KindEnum {
				return g.qual(tt.Enum.Program, publicize(tt.Enum.Name)+"_"+ev.Name)
			}
		}
		return g.goType(t, owner) + "(" + strconv.FormatInt(v.Int, 10) + ")"
	case idl.KindBool:
		switch {
		case v.Kind == idl.ConstIdent:
			return strconv.FormatBool(v.Ident == "true")
		default:
			return strconv.FormatBool(v.Int != 0)
		}
	case idl.KindI8, idl.KindI16, idl.KindI32, idl.KindI64:
		if v.Kind == idl.ConstIdent && v.EnumValue != nil {
			return strconv.FormatInt(v.EnumValue.Value, 10)
		}
		return strconv.FormatInt(v.Int, 10)
	case idl.KindDouble:
		if v.Kind == idl.ConstInt {
			return strconv.FormatInt(v.Int, 10)
		}
		return floatLit(v.Double)
	case idl.KindString:
		return strconv.Quote(v.String)
	case idl.KindBinary:
		return g.goType(t, owner) + "(" + strconv.Quote(v.String) + ")"
	case idl.KindUUID:
		return g.goType(t, owner) + uuidLit(v.String)
	}
	return "nil"
}

func floatLit(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// uuidLit renders a canonical UUID string as a [16]byte literal body.
func uuidLit(s string) string {
	raw, err := hex.DecodeString(strings.ReplaceAll(strings.Trim(s, "{}"), "-", ""))
	if err != nil || len(raw) != 16 {
		raw = make([]byte, 16) // the resolver validates UUID literals
	}
	parts := make([]string, 16)
	for i, b := range raw {
		parts[i] = fmt.Sprintf("0x%02x", b)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// structConst renders a struct literal `&T{Field: value, ...}`.
func (g *generator) structConst(t *idl.Type, st *idl.Struct, v *idl.ConstValue, owner *idl.Program) string {
	name := g.typeName(t)
	var b strings.Builder
	b.WriteString("&" + name + "{\n")
	for _, kv := range v.Map {
		fname := kv.Key.String
		if kv.Key.Kind == idl.ConstIdent {
			fname = kv.Key.Ident
		}
		var f *idl.Field
		var goName string
		for i, cand := range st.Fields {
			if cand.Name == fname {
				f, goName = cand, fieldGoNames(st.Kind, st.Fields)[i]
			}
		}
		if f == nil {
			continue // the resolver reports unknown fields
		}
		val := g.constValue(f.Type, kv.Value, st.Program)
		opt := f.Req == idl.Optional || st.Kind == idl.StructKindUnion
		if isPointerField(f.Type, opt, f.Default != nil) && !isStructType(f.Type) {
			ft := g.goType(f.Type, st.Program)
			val = fmt.Sprintf("func() *%s { v := %s(%s); return &v }()", ft, ft, val)
			if isContainer(f.Type) {
				val = fmt.Sprintf("func() *%s { v := %s; return &v }()", ft, g.constValue(f.Type, kv.Value, st.Program))
			}
		}
		fmt.Fprintf(&b, "%s: %s,\n", goName, val)
	}
	b.WriteString("}")
	return b.String()
}
