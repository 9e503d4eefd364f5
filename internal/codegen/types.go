package codegen

import (
	"github.com/hatrpc/hatrpc/pkg/idl"
)

// baseInfo describes how a base type (or an enum, which travels as i32)
// maps onto Go and onto the proto reader/writer methods.
type baseInfo struct {
	goType string // Go type of the wire value
	method string // suffix of Write*/Read*
	wire   string // proto.Type constant name
}

var baseInfos = map[idl.TypeKind]baseInfo{
	idl.KindBool:   {"bool", "Bool", "BOOL"},
	idl.KindI8:     {"int8", "I8", "I8"},
	idl.KindI16:    {"int16", "I16", "I16"},
	idl.KindI32:    {"int32", "I32", "I32"},
	idl.KindI64:    {"int64", "I64", "I64"},
	idl.KindDouble: {"float64", "Double", "DOUBLE"},
	idl.KindString: {"string", "String", "STRING"},
	idl.KindBinary: {"[]byte", "Binary", "STRING"},
	idl.KindUUID:   {"[16]byte", "UUID", "UUID"},
	idl.KindEnum:   {"int32", "I32", "I32"},
}

// trueKind is the kind after typedef resolution.
func trueKind(t *idl.Type) idl.TypeKind {
	if tt := t.TrueType(); tt != nil {
		return tt.Kind
	}
	return idl.KindVoid
}

func isStructType(t *idl.Type) bool { return trueKind(t) == idl.KindStruct }

func isContainer(t *idl.Type) bool {
	switch trueKind(t) {
	case idl.KindList, idl.KindSet, idl.KindMap:
		return true
	}
	return false
}

// isScalar: values Go compares with == and Apache makes pointers when
// optional (binary is a slice, so it is not).
func isScalar(t *idl.Type) bool {
	switch trueKind(t) {
	case idl.KindBool, idl.KindI8, idl.KindI16, idl.KindI32, idl.KindI64,
		idl.KindDouble, idl.KindString, idl.KindUUID, idl.KindEnum:
		return true
	}
	return false
}

// needsEntries reports map keys Go cannot use as map keys with value
// semantics (THRIFT-2063): such maps become a slice of MapEntry pairs.
func needsEntries(key *idl.Type) bool {
	switch trueKind(key) {
	case idl.KindList, idl.KindSet, idl.KindMap, idl.KindStruct:
		return true
	}
	return false
}

// isNamed reports whether the Go type of t is a defined type that needs a
// conversion to and from its wire representation.
func isNamed(t *idl.Type) bool {
	return t.Kind == idl.KindTypedef || t.Kind == idl.KindEnum
}

// typeName is the (qualified) Go name of a named IDL type, without pointer.
func (g *generator) typeName(t *idl.Type) string {
	switch t.Kind {
	case idl.KindTypedef:
		return g.qual(t.Typedef.Program, publicize(t.Typedef.Name))
	case idl.KindStruct:
		return g.qual(t.Struct.Program, publicize(t.Struct.Name))
	case idl.KindEnum:
		return g.qual(t.Enum.Program, publicize(t.Enum.Name))
	}
	return ""
}

// goType renders the Go type of a value of t written in program owner
// (owner decides which package's MapEntry a non-scalar-key map uses).
// Struct types are pointers, as Apache renders them everywhere.
func (g *generator) goType(t *idl.Type, owner *idl.Program) string {
	switch t.Kind {
	case idl.KindTypedef:
		if isStructType(t) {
			return "*" + g.typeName(t)
		}
		return g.typeName(t)
	case idl.KindStruct:
		return "*" + g.typeName(t)
	case idl.KindEnum:
		return g.typeName(t)
	case idl.KindList, idl.KindSet:
		return "[]" + g.goType(t.Elem, owner)
	case idl.KindMap:
		if needsEntries(t.Key) {
			return "[]" + g.entryType(owner) + "[" + g.goType(t.Key, owner) + ", " + g.goType(t.Elem, owner) + "]"
		}
		return "map[" + g.keyType(t.Key, owner) + "]" + g.goType(t.Elem, owner)
	case idl.KindVoid:
		return ""
	}
	return baseInfos[t.Kind].goType
}

// keyType is the Go map key type; binary keys become string like Apache's.
func (g *generator) keyType(t *idl.Type, owner *idl.Program) string {
	if trueKind(t) == idl.KindBinary {
		return "string"
	}
	return g.goType(t, owner)
}

// wire renders the proto.Type constant of t.
func (g *generator) wire(t *idl.Type) string {
	proto := g.e.use(protoPath, g.protoName)
	switch k := trueKind(t); k {
	case idl.KindList:
		return proto + ".LIST"
	case idl.KindSet:
		return proto + ".SET"
	case idl.KindMap:
		return proto + ".MAP"
	case idl.KindStruct:
		return proto + ".STRUCT"
	default:
		return proto + "." + baseInfos[k].wire
	}
}

// entryType names the generic pair type of owner's package.
func (g *generator) entryType(owner *idl.Program) string {
	pi := g.pkgOf(owner)
	g.set.needEntry[pi.importPath] = pi
	return g.qual(owner, entryTypeName)
}

const entryTypeName = "MapEntry"

// genEntryFile renders the package-level MapEntry declaration.
func genEntryFile(pi pkgInfo) ([]byte, error) {
	e := newEmitter()
	e.p("// %s is one entry of a Thrift map whose key type Go cannot use as a map", entryTypeName)
	e.p("// key (a list, set, map or struct; see THRIFT-2063). A slice of entries keeps")
	e.p("// every pair in wire order and still encodes as a Thrift map.")
	e.p("type %s[K, V any] struct {", entryTypeName)
	e.p("Key K")
	e.p("Value V")
	e.p("}")
	return e.render(pi.name, "")
}

// genTypedef renders `typedef T Name`. Struct typedefs are aliases so that a
// *Name is a *Struct (fields of both spellings interoperate); every other
// typedef is a defined type as in Apache.
func (g *generator) genTypedef(td *idl.Typedef) {
	name := publicize(td.Name)
	g.e.buf.WriteString(comment(td.Doc))
	if isStructType(td.Type) {
		g.e.p("type %s = %s", name, g.typeName(td.Type))
		g.e.p("")
		g.e.p("func %sPtr(v %s) *%s { return &v }", name, name, name)
		g.e.p("")
		return
	}
	g.e.p("type %s %s", name, g.goType(td.Type, td.Program))
	g.e.p("")
	g.e.p("func %sPtr(v %s) *%s { return &v }", name, name, name)
	g.e.p("")
}

// genEnum renders an enum as an int64-based type with Apache's helpers.
func (g *generator) genEnum(en *idl.Enum) {
	name := publicize(en.Name)
	fmtPkg := g.e.std("fmt")
	g.e.buf.WriteString(comment(en.Doc))
	g.e.p("type %s int64", name)
	g.e.p("")
	if len(en.Values) > 0 {
		g.e.p("const (")
		for _, v := range en.Values {
			g.e.buf.WriteString(comment(v.Doc))
			g.e.p("%s_%s %s = %d", name, v.Name, name, v.Value)
		}
		g.e.p(")")
		g.e.p("")
	}
	g.e.p("func (p %s) String() string {", name)
	g.e.p("switch p {")
	seen := map[int64]bool{}
	for _, v := range en.Values {
		if seen[v.Value] {
			continue // duplicate values would be duplicate cases
		}
		seen[v.Value] = true
		g.e.p("case %s_%s:", name, v.Name)
		g.e.p("return %q", v.Name)
	}
	g.e.p("}")
	g.e.p("return \"<UNSET>\"")
	g.e.p("}")
	g.e.p("")
	g.e.p("func %sFromString(s string) (%s, error) {", name, name)
	g.e.p("switch s {")
	for _, v := range en.Values {
		g.e.p("case %q:", v.Name)
		g.e.p("return %s_%s, nil", name, v.Name)
	}
	g.e.p("}")
	g.e.p("return %s(0), %s.Errorf(\"not a valid %s string\")", name, fmtPkg, name)
	g.e.p("}")
	g.e.p("")
	g.e.p("func %sPtr(v %s) *%s { return &v }", name, name, name)
	g.e.p("")
	g.e.p("func (p %s) MarshalText() ([]byte, error) { return []byte(p.String()), nil }", name)
	g.e.p("")
	g.e.p("func (p *%s) UnmarshalText(text []byte) error {", name)
	g.e.p("q, err := %sFromString(string(text))", name)
	g.e.p("if err != nil {")
	g.e.p("return err")
	g.e.p("}")
	g.e.p("*p = q")
	g.e.p("return nil")
	g.e.p("}")
	g.e.p("")
	g.e.p("func (p *%s) Scan(value any) error {", name)
	g.e.p("v, ok := value.(int64)")
	g.e.p("if !ok {")
	g.e.p("return %s.New(\"Scan value is not int64\")", g.e.std("errors"))
	g.e.p("}")
	g.e.p("*p = %s(v)", name)
	g.e.p("return nil")
	g.e.p("}")
	g.e.p("")
	g.e.p("func (p *%s) Value() (%s.Value, error) {", name, g.e.std("database/sql/driver"))
	g.e.p("if p == nil {")
	g.e.p("return nil, nil")
	g.e.p("}")
	g.e.p("return int64(*p), nil")
	g.e.p("}")
	g.e.p("")
}
