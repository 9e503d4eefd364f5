package codegen

import (
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// genHintTable renders `var <S>Hints = hints.Service{...}`.
func (g *generator) genHintTable(svc *idl.Service, res *hints.Resolution) {
	name := publicize(svc.Name)
	h := g.e.use(hintsPath, "hints")
	table := res.Service()
	g.e.p("// %sHints is the resolved hint table of service %s (defaults applied;", name, svc.Name)
	g.e.p("// fields left out have their default value).")
	g.e.p("var %sHints = %s.Service{", name, h)
	g.e.p("Name: %q,", table.Name)
	g.e.p("Client: %s,", hints.GoLiteral(table.Client))
	g.e.p("Server: %s,", hints.GoLiteral(table.Server))
	g.e.p("Functions: []%s.Function{", h)
	modes := map[string]stream.Mode{}
	for _, fn := range svc.AllFunctions() {
		modes[fn.Name] = fn.Stream
	}
	for _, f := range table.Functions {
		if m := modes[f.Name]; m != stream.None {
			g.e.p("{Name: %q, Client: %s, Server: %s, Stream: %s.%s},", f.Name, hints.GoLiteral(f.Client), hints.GoLiteral(f.Server),
				g.e.use(streamPath, "stream"), modeConst[m])
			continue
		}
		g.e.p("{Name: %q, Client: %s, Server: %s},", f.Name, hints.GoLiteral(f.Client), hints.GoLiteral(f.Server))
	}
	g.e.p("},")
	g.e.p("}")
	g.e.p("")
}
