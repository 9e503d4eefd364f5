package codegen

import (
	"fmt"
	"strconv"

	"github.com/hatrpc/hatrpc/pkg/idl"
)

// structDef is a struct to render: an IDL struct/union/exception or a
// service's args/result helper.
type structDef struct {
	name   string // Go type name
	idl    string // name used in error messages
	kind   idl.StructKind
	doc    string
	fields []*fieldDef
	owner  *idl.Program // program the field types are written in
}

// fieldDef is a field with its Go mapping decided once.
type fieldDef struct {
	f        *idl.Field
	name     string // Go field name
	valType  string // Go type of the value
	goType   string // Go type of the field (valType or *valType)
	ptr      bool   // field holds a pointer to a non-struct value
	isStruct bool
	optional bool // union fields and result fields count as optional
	required bool
	def      *idl.ConstValue
	defVar   string // the <Struct>_<Field>_DEFAULT variable, when rendered
}

// isPointerField mirrors Apache's is_pointer_field: structs always; optional
// scalars without default; optional containers with a default.
func isPointerField(t *idl.Type, optional, hasDefault bool) bool {
	if isStructType(t) {
		return true
	}
	if !optional {
		return false
	}
	switch {
	case trueKind(t) == idl.KindBinary:
		return false
	case isScalar(t):
		return !hasDefault
	default:
		return hasDefault
	}
}

func (g *generator) structInfo(st *idl.Struct) *structDef {
	sd := &structDef{name: publicize(st.Name), idl: st.Name, kind: st.Kind, doc: st.Doc, owner: st.Program}
	names := fieldGoNames(st.Kind, st.Fields)
	for i, f := range st.Fields {
		opt := f.Req == idl.Optional || st.Kind == idl.StructKindUnion
		sd.fields = append(sd.fields, g.fieldInfo(sd, f, names[i], opt))
	}
	return sd
}

func (g *generator) fieldInfo(sd *structDef, f *idl.Field, name string, optional bool) *fieldDef {
	fd := &fieldDef{
		f: f, name: name, optional: optional, required: f.Req == idl.Required,
		isStruct: isStructType(f.Type), def: f.Default,
	}
	fd.valType = g.goType(f.Type, sd.owner)
	fd.ptr = isPointerField(f.Type, optional, f.Default != nil) && !fd.isStruct
	fd.goType = fd.valType
	if fd.ptr {
		fd.goType = "*" + fd.valType
	}
	return fd
}

func (fd *fieldDef) tag() string {
	name := fd.f.Name
	thrift := name + "," + strconv.Itoa(fd.f.ID)
	if fd.required {
		thrift += ",required"
	}
	json := name
	if fd.optional && fd.def == nil {
		json += ",omitempty"
	}
	return fmt.Sprintf("`thrift:%q db:%q json:%q`", thrift, name, json)
}

// hasDefaultVar: Apache renders <S>_<F>_DEFAULT for pointer fields and for
// optional fields (IsSet of an optional scalar with a default compares
// against it).
func (fd *fieldDef) hasDefaultVar() bool { return fd.ptr || fd.isStruct || fd.optional }

// isSetExpr is the Apache IsSet condition.
func (fd *fieldDef) isSetExpr(defVar string) string {
	switch {
	case fd.ptr || fd.isStruct:
		return "p." + fd.name + " != nil"
	case isContainer(fd.f.Type) || trueKind(fd.f.Type) == idl.KindBinary:
		return "p." + fd.name + " != nil"
	default:
		return "p." + fd.name + " != " + defVar
	}
}

func (g *generator) genStruct(sd *structDef) {
	g.e.buf.WriteString(comment(sd.doc))
	g.e.p("type %s struct {", sd.name)
	for _, fd := range sd.fields {
		g.e.buf.WriteString(comment(fd.f.Doc))
		g.e.p("%s %s %s", fd.name, fd.goType, fd.tag())
	}
	g.e.p("}")
	g.e.p("")
	g.genNew(sd)
	for _, fd := range sd.fields {
		g.genGetter(sd, fd)
	}
	for _, fd := range sd.fields {
		if fd.optional || fd.ptr || fd.isStruct {
			g.e.p("func (p *%s) IsSet%s() bool {", sd.name, fd.name)
			g.e.p("return %s", fd.isSetExpr(fd.defVar))
			g.e.p("}")
			g.e.p("")
		}
	}
	if sd.kind == idl.StructKindUnion {
		g.e.p("// CountSetFields%s counts the fields set; a union may have at most one.", sd.name)
		g.e.p("func (p *%s) CountSetFields%s() int {", sd.name, sd.name)
		g.e.p("count := 0")
		for _, fd := range sd.fields {
			g.e.p("if p.IsSet%s() {", fd.name)
			g.e.p("count++")
			g.e.p("}")
		}
		g.e.p("return count")
		g.e.p("}")
		g.e.p("")
	}
	fmtPkg := g.e.std("fmt")
	g.e.p("func (p *%s) String() string {", sd.name)
	g.e.p("if p == nil {")
	g.e.p("return \"<nil>\"")
	g.e.p("}")
	g.e.p("return %s.Sprintf(\"%s(%%+v)\", *p)", fmtPkg, sd.name)
	g.e.p("}")
	g.e.p("")
	if sd.kind == idl.StructKindException {
		g.e.p("func (p *%s) Error() string { return p.String() }", sd.name)
		g.e.p("")
	}
	g.genCodec(sd, "Binary")
	g.genCodec(sd, "Compact")
	g.e.p("var _ %s.Struct = (*%s)(nil)", g.e.use(protoPath, g.protoName), sd.name)
	g.e.p("")
}

// genNew renders NewX, which applies the IDL defaults of value fields
// (pointer fields report theirs through GetX, as in Apache).
func (g *generator) genNew(sd *structDef) {
	g.e.p("func %s() *%s {", newName(sd.name), sd.name)
	g.e.p("return &%s{", sd.name)
	for _, fd := range sd.fields {
		if fd.def == nil || fd.ptr || fd.isStruct || omitInit(fd) {
			continue
		}
		g.e.p("%s: %s,", fd.name, g.constValue(fd.f.Type, fd.def, sd.owner))
	}
	g.e.p("}")
	g.e.p("}")
	g.e.p("")
}

// omitInit mirrors Apache's omit_initialization: zero defaults are left to
// Go's zero value.
func omitInit(fd *fieldDef) bool {
	v := fd.def
	switch trueKind(fd.f.Type) {
	case idl.KindString:
		return v.Kind == idl.ConstString && v.String == ""
	case idl.KindBool, idl.KindI8, idl.KindI16, idl.KindI32, idl.KindI64:
		return v.Kind == idl.ConstInt && v.Int == 0
	case idl.KindDouble:
		return (v.Kind == idl.ConstInt && v.Int == 0) || (v.Kind == idl.ConstDouble && v.Double == 0)
	}
	return false
}

func (g *generator) genGetter(sd *structDef, fd *fieldDef) {
	if !fd.hasDefaultVar() {
		g.e.p("func (p *%s) Get%s() %s {", sd.name, fd.name, fd.valType)
		g.e.p("return p.%s", fd.name)
		g.e.p("}")
		g.e.p("")
		return
	}
	fd.defVar = sd.name + "_" + fd.name + "_DEFAULT"
	if fd.def != nil {
		g.e.p("var %s %s = %s", fd.defVar, fd.valType, g.constValue(fd.f.Type, fd.def, sd.owner))
	} else {
		g.e.p("var %s %s", fd.defVar, fd.valType)
	}
	g.e.p("")
	g.e.p("func (p *%s) Get%s() %s {", sd.name, fd.name, fd.valType)
	switch {
	case fd.ptr:
		g.e.p("if !p.IsSet%s() {", fd.name)
		g.e.p("return %s", fd.defVar)
		g.e.p("}")
		g.e.p("return *p.%s", fd.name)
	case fd.isStruct:
		g.e.p("if !p.IsSet%s() {", fd.name)
		g.e.p("return %s", fd.defVar)
		g.e.p("}")
		g.e.p("return p.%s", fd.name)
	default:
		g.e.p("return p.%s", fd.name)
	}
	g.e.p("}")
	g.e.p("")
}
