package codegen

import (
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/idl"
)

func hintPos(p idl.Pos) hints.Pos { return hints.Pos{File: p.File, Line: p.Line, Col: p.Col} }

// RawGroups converts parsed hint groups into the resolver's input; the two
// packages mirror each other so pkg/hints need not import the parser.
func RawGroups(gs []*idl.HintGroup) []hints.RawGroup {
	out := make([]hints.RawGroup, 0, len(gs))
	for _, g := range gs {
		rg := hints.RawGroup{Side: hints.RawSide(g.Side), Pos: hintPos(g.Pos)}
		for _, e := range g.Entries {
			rg.Entries = append(rg.Entries, hints.RawEntry{
				Key: e.Key, Value: e.Value, Kind: hints.ValueKind(e.Kind),
				Pos: hintPos(e.Pos), ValuePos: hintPos(e.ValuePos),
			})
		}
		out = append(out, rg)
	}
	return out
}

// ResolveHints resolves the hint table of a service. Inherited functions
// keep their own function-level groups and take the service-level groups of
// svc: a service's hints describe how that service is served and called.
func ResolveHints(svc *idl.Service) (*hints.Resolution, error) {
	var funcs []hints.RawFunction
	for _, fn := range svc.AllFunctions() {
		funcs = append(funcs, hints.RawFunction{Name: fn.Name, Groups: RawGroups(fn.Hints), Pos: hintPos(fn.Pos)})
	}
	return hints.Resolve(svc.Name, RawGroups(svc.Hints), funcs)
}

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
	for _, f := range table.Functions {
		g.e.p("{Name: %q, Client: %s, Server: %s},", f.Name, hints.GoLiteral(f.Client), hints.GoLiteral(f.Server))
	}
	g.e.p("},")
	g.e.p("}")
	g.e.p("")
}
