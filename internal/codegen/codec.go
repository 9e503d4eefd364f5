package codegen

import (
	"strconv"

	"github.com/hatrpc/hatrpc/pkg/idl"
)

// resolve follows typedefs like TrueType and also returns the program the
// underlying type expression is written in (it owns its MapEntry type).
func resolve(t *idl.Type, owner *idl.Program) (*idl.Type, *idl.Program) {
	for t != nil && t.Kind == idl.KindTypedef && t.Typedef != nil {
		owner = t.Typedef.Program
		t = t.Typedef.Type
	}
	return t, owner
}

// genCodec renders Encode<sfx> and Decode<sfx>; the binary and compact
// writers (and readers) share one method set, so the bodies are identical.
func (g *generator) genCodec(sd *structDef, sfx string) {
	proto := g.e.use(protoPath, g.protoName)
	g.e.p("func (p *%s) Encode%s(w *%s.%sWriter) error {", sd.name, sfx, proto, sfx)
	// Like Apache, a nil struct travels as an empty one.
	g.e.p("if p == nil {")
	g.e.p("w.WriteStructBegin()")
	g.e.p("w.WriteFieldStop()")
	g.e.p("w.WriteStructEnd()")
	g.e.p("return nil")
	g.e.p("}")
	if sd.kind == idl.StructKindUnion {
		g.e.p("if c := p.CountSetFields%s(); c > 1 {", sd.name)
		g.e.p("return %s.Errorf(\"%%w: union %s has %%d fields set, at most one is allowed\", %s.ErrInvalidData, c)", g.e.std("fmt"), sd.idl, proto)
		g.e.p("}")
	}
	for _, fd := range sd.fields {
		if fd.required && fd.isStruct {
			g.e.p("if p.%s == nil {", fd.name)
			g.e.p("return %s.RequiredFieldError(%q, %q)", proto, sd.idl, fd.f.Name)
			g.e.p("}")
		}
	}
	g.e.p("w.WriteStructBegin()")
	for _, fd := range sd.fields {
		guard := ""
		switch {
		case fd.optional:
			guard = "p.IsSet" + fd.name + "()"
		case fd.isStruct:
			guard = "p." + fd.name + " != nil"
		}
		if guard != "" {
			g.e.p("if %s {", guard)
		}
		g.e.p("w.WriteFieldBegin(%s, %d)", g.wire(fd.f.Type), fd.f.ID)
		expr := "p." + fd.name
		if fd.ptr {
			expr = "*" + expr
		}
		g.encodeValue(fd.f.Type, expr, 0, sfx, sd.owner, false)
		if guard != "" {
			g.e.p("}")
		}
	}
	g.e.p("w.WriteFieldStop()")
	g.e.p("w.WriteStructEnd()")
	g.e.p("return nil")
	g.e.p("}")
	g.e.p("")

	g.e.p("func (p *%s) Decode%s(r *%s.%sReader) error {", sd.name, sfx, proto, sfx)
	g.e.p("if err := r.ReadStructBegin(); err != nil {")
	g.e.p("return err")
	g.e.p("}")
	for _, fd := range sd.fields {
		if fd.required {
			g.e.p("isset%s := false", fd.name)
		}
	}
	g.e.p("for {")
	if len(sd.fields) > 0 {
		// ReadFieldBeginFast inlines (ReadFieldBegin cannot), so a field
		// costs no call for its header; STOP and errors take the call.
		g.e.p("t, id, ok := r.ReadFieldBeginFast()")
		g.e.p("var err error")
		g.e.p("if !ok {")
		g.e.p("if t, id, err = r.ReadFieldBegin(); err != nil {")
		g.e.p("return err")
		g.e.p("}")
		g.e.p("if t == %s.STOP {", proto)
		g.e.p("break")
		g.e.p("}")
		g.e.p("}")
	} else {
		g.e.p("t, _, err := r.ReadFieldBegin()")
		g.e.p("if err != nil {")
		g.e.p("return err")
		g.e.p("}")
		g.e.p("if t == %s.STOP {", proto)
		g.e.p("break")
		g.e.p("}")
	}
	// Unknown fields and fields of an unexpected type are skipped, as
	// Thrift's versioning rules require. Dispatching on the id alone lets
	// the compiler turn the switch into a jump table or binary search; the
	// wire type is then checked inside the case.
	if len(sd.fields) == 0 {
		g.e.p("if err := r.Skip(t); err != nil {")
		g.e.p("return err")
		g.e.p("}")
		g.e.p("}")
		g.genDecodeEnd(sd, proto)
		return
	}
	g.e.p("switch id {")
	for _, fd := range sd.fields {
		g.e.p("case %d:", fd.f.ID)
		g.e.p("if t != %s {", g.wire(fd.f.Type))
		g.e.p("if err := r.Skip(t); err != nil {")
		g.e.p("return err")
		g.e.p("}")
		g.e.p("break")
		g.e.p("}")
		if fd.ptr {
			g.e.p("var fv %s", fd.valType)
			g.decodeValue(fd.f.Type, "fv", 0, sfx, sd.owner, false)
			g.e.p("p.%s = &fv", fd.name)
		} else {
			g.decodeValue(fd.f.Type, "p."+fd.name, 0, sfx, sd.owner, false)
		}
		if fd.required {
			g.e.p("isset%s = true", fd.name)
		}
	}
	g.e.p("default:")
	g.e.p("if err := r.Skip(t); err != nil {")
	g.e.p("return err")
	g.e.p("}")
	g.e.p("}")
	g.e.p("}")
	g.genDecodeEnd(sd, proto)
}

// genDecodeEnd closes a Decode method after its field loop: it reads the
// struct end and checks that every required field was seen.
func (g *generator) genDecodeEnd(sd *structDef, proto string) {
	g.e.p("if err := r.ReadStructEnd(); err != nil {")
	g.e.p("return err")
	g.e.p("}")
	for _, fd := range sd.fields {
		if fd.required {
			g.e.p("if !isset%s {", fd.name)
			g.e.p("return %s.RequiredFieldError(%q, %q)", proto, sd.idl, fd.f.Name)
			g.e.p("}")
		}
	}
	g.e.p("return nil")
	g.e.p("}")
	g.e.p("")
}

// encodeValue writes expr, a Go value of IDL type t. key marks a Go map key
// (binary keys are strings there).
func (g *generator) encodeValue(t *idl.Type, expr string, depth int, sfx string, owner *idl.Program, key bool) {
	tt, towner := resolve(t, owner)
	d := strconv.Itoa(depth)
	switch tt.Kind {
	case idl.KindStruct:
		g.e.p("if err := %s.Encode%s(w); err != nil {", expr, sfx)
		g.e.p("return err")
		g.e.p("}")
	case idl.KindList, idl.KindSet:
		begin := "WriteListBegin"
		if tt.Kind == idl.KindSet {
			begin = "WriteSetBegin"
		}
		g.e.p("w.%s(%s, len(%s))", begin, g.wire(tt.Elem), expr)
		if m := bulkMethod(tt.Elem); m != "" {
			g.e.p("w.Write%s(%s)", m, expr)
			return
		}
		g.e.p("for _, v%s := range %s {", d, expr)
		g.encodeValue(tt.Elem, "v"+d, depth+1, sfx, towner, false)
		g.e.p("}")
	case idl.KindMap:
		g.e.p("w.WriteMapBegin(%s, %s, len(%s))", g.wire(tt.Key), g.wire(tt.Elem), expr)
		if needsEntries(tt.Key) {
			g.e.p("for _, e%s := range %s {", d, expr)
			g.encodeValue(tt.Key, "e"+d+".Key", depth+1, sfx, towner, false)
			g.encodeValue(tt.Elem, "e"+d+".Value", depth+1, sfx, towner, false)
		} else {
			g.e.p("for k%s, v%s := range %s {", d, d, expr)
			g.encodeValue(tt.Key, "k"+d, depth+1, sfx, towner, true)
			g.encodeValue(tt.Elem, "v"+d, depth+1, sfx, towner, false)
		}
		g.e.p("}")
	default:
		bi := baseInfos[tt.Kind]
		if isNamed(t) || (key && tt.Kind == idl.KindBinary) {
			expr = bi.goType + "(" + expr + ")"
		}
		g.e.p("w.Write%s(%s)", bi.method, expr)
	}
}

// decodeValue reads a value of IDL type t into the assignable dst.
func (g *generator) decodeValue(t *idl.Type, dst string, depth int, sfx string, owner *idl.Program, key bool) {
	tt, towner := resolve(t, owner)
	d := strconv.Itoa(depth)
	proto := g.e.use(protoPath, g.protoName)
	switch tt.Kind {
	case idl.KindStruct:
		g.e.p("%s = %s()", dst, g.qual(tt.Struct.Program, newName(publicize(tt.Struct.Name))))
		g.e.p("if err := %s.Decode%s(r); err != nil {", dst, sfx)
		g.e.p("return err")
		g.e.p("}")
	case idl.KindList, idl.KindSet:
		begin := "ReadListBegin"
		if tt.Kind == idl.KindSet {
			begin = "ReadSetBegin"
		}
		g.e.p("{")
		g.e.p("et%s, n%s, err := r.%s()", d, d, begin)
		g.e.p("if err != nil {")
		g.e.p("return err")
		g.e.p("}")
		g.e.p("if n%s > 0 && et%s != %s {", d, d, g.wire(tt.Elem))
		g.e.p("return %s.Errorf(\"%%w: element type %%v, want %%v\", %s.ErrBadType, et%s, %s)", g.e.std("fmt"), proto, d, g.wire(tt.Elem))
		g.e.p("}")
		g.e.p("%s = make(%s, n%s)", dst, g.goType(t, owner), d)
		if m := bulkMethod(tt.Elem); m != "" {
			g.e.p("if err = r.Read%s(%s); err != nil {", m, dst)
			g.e.p("return err")
			g.e.p("}")
		} else {
			g.e.p("for i%s := range n%s {", d, d)
			g.decodeValue(tt.Elem, dst+"[i"+d+"]", depth+1, sfx, towner, false)
			g.e.p("}")
		}
		g.e.p("}")
	case idl.KindMap:
		g.e.p("{")
		g.e.p("kt%s, vt%s, n%s, err := r.ReadMapBegin()", d, d, d)
		g.e.p("if err != nil {")
		g.e.p("return err")
		g.e.p("}")
		g.e.p("if n%s > 0 && (kt%s != %s || vt%s != %s) {", d, d, g.wire(tt.Key), d, g.wire(tt.Elem))
		g.e.p("return %s.Errorf(\"%%w: map types %%v/%%v, want %%v/%%v\", %s.ErrBadType, kt%s, vt%s, %s, %s)",
			g.e.std("fmt"), proto, d, d, g.wire(tt.Key), g.wire(tt.Elem))
		g.e.p("}")
		g.e.p("%s = make(%s, n%s)", dst, g.goType(t, owner), d)
		if needsEntries(tt.Key) {
			g.e.p("for i%s := range n%s {", d, d)
			g.decodeValue(tt.Key, dst+"[i"+d+"].Key", depth+1, sfx, towner, false)
			g.decodeValue(tt.Elem, dst+"[i"+d+"].Value", depth+1, sfx, towner, false)
		} else {
			g.e.p("for range n%s {", d)
			g.e.p("var k%s %s", d, g.keyType(tt.Key, towner))
			g.decodeValue(tt.Key, "k"+d, depth+1, sfx, towner, true)
			g.e.p("var v%s %s", d, g.goType(tt.Elem, towner))
			g.decodeValue(tt.Elem, "v"+d, depth+1, sfx, towner, false)
			g.e.p("%s[k%s] = v%s", dst, d, d)
		}
		g.e.p("}")
		g.e.p("}")
	default:
		bi := baseInfos[tt.Kind]
		val := "v"
		switch {
		case key && tt.Kind == idl.KindBinary:
			val = "string(v)"
		case isNamed(t):
			val = g.goType(t, owner) + "(v)"
		default:
			// Every caller has err in scope: read straight into dst.
			g.e.p("if %s, err = r.Read%s(); err != nil {", dst, bi.method)
			g.e.p("return err")
			g.e.p("}")
			return
		}
		g.e.p("if v, err := r.Read%s(); err != nil {", bi.method)
		g.e.p("return err")
		g.e.p("} else {")
		g.e.p("%s = %s", dst, val)
		g.e.p("}")
	}
}

// bulkMethods names the whole-list Write<m>/Read<m> methods of the
// protocol writers and readers by element kind. A list of a named element
// type (typedef, enum) is not a []int64 etc., so it keeps the element loop.
var bulkMethods = map[idl.TypeKind]string{
	idl.KindBool: "Bools", idl.KindI8: "I8s", idl.KindI16: "I16s", idl.KindI32: "I32s",
	idl.KindI64: "I64s", idl.KindDouble: "Doubles", idl.KindString: "Strings", idl.KindBinary: "Binaries",
}

// bulkMethod returns the whole-list method suffix for elem, or "".
func bulkMethod(elem *idl.Type) string { return bulkMethods[elem.Kind] }
