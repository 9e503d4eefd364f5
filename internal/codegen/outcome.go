package codegen

import "github.com/hatrpc/hatrpc/pkg/idl"

// genThrown renders the result struct's proto.Thrower method, which names
// the declared exception a result carries, so server and client metrics
// can label a call's outcome with it (pkg/proto.Outcome).
func (g *generator) genThrown(fn *idl.Function, result *structDef) {
	if len(fn.Throws) == 0 {
		return
	}
	g.e.p("// ThrownException names the declared exception the result carries (\"\" for none).")
	g.e.p("func (p *%s) ThrownException() string {", result.name)
	g.e.p("switch {")
	g.e.p("case p == nil:")
	g.e.p("return \"\"")
	for _, fd := range result.fields {
		if fd.f.ID == 0 && fd.f.Name == "success" {
			continue
		}
		g.e.p("case p.%s != nil:", fd.name)
		g.e.p("return %q", thrownName(fd.f.Type))
	}
	g.e.p("}")
	g.e.p("return \"\"")
	g.e.p("}")
	g.e.p("")
}

// thrownName is the exception's own IDL name, without an include prefix.
func thrownName(t *idl.Type) string {
	if tt := t.TrueType(); tt != nil && tt.Struct != nil {
		return tt.Struct.Name
	}
	return t.Name
}
