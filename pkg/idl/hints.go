package idl

import "github.com/hatrpc/hatrpc/pkg/hints"

// Closure returns p and every program it includes, transitively, each
// once, p first.
func (p *Program) Closure() []*Program {
	var out []*Program
	seen := map[*Program]bool{}
	var walk func(p *Program)
	walk = func(p *Program) {
		if p == nil || seen[p] {
			return
		}
		seen[p] = true
		out = append(out, p)
		for _, inc := range p.Includes {
			walk(inc.Program)
		}
	}
	walk(p)
	return out
}

func hintPos(p Pos) hints.Pos { return hints.Pos{File: p.File, Line: p.Line, Col: p.Col} }

// RawHintGroups converts parsed hint groups into the resolver's input;
// the two packages mirror each other so pkg/hints need not import the
// parser.
func RawHintGroups(gs []*HintGroup) []hints.RawGroup {
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

// ResolveHints resolves the hint table of the service. Inherited
// functions keep their own function-level groups and take the
// service-level groups of s: a service's hints describe how that service
// is served and called. hatgen bakes the result into generated code;
// pkg/generic resolves it at run time, the same way.
func (s *Service) ResolveHints() (*hints.Resolution, error) {
	var funcs []hints.RawFunction
	for _, fn := range s.AllFunctions() {
		funcs = append(funcs, hints.RawFunction{Name: fn.Name, Groups: RawHintGroups(fn.Hints), Pos: hintPos(fn.Pos)})
	}
	return hints.Resolve(s.Name, RawHintGroups(s.Hints), funcs)
}
