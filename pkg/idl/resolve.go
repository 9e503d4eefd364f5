package idl

import (
	"fmt"
	"strings"
)

// lookup finds a top-level declaration by name, either local or as
// `include.Name` through one of u's includes.
func lookup[T any](l *loader, u *unit, name string, table func(*scope) map[string]T) (T, bool) {
	if v, ok := table(u.scope)[name]; ok {
		return v, true
	}
	for _, inc := range u.prog.Includes {
		if inc.Program == nil {
			continue
		}
		prefix := inc.Program.Name + "."
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			if iu := l.byPrg[inc.Program]; iu != nil && iu.scope != nil {
				if v, ok := table(iu.scope)[rest]; ok {
					return v, true
				}
			}
		}
	}
	var zero T
	return zero, false
}

// viaBrokenInclude tells whether name refers into an include that failed to
// parse: reporting it as unknown would only repeat that syntax error.
func (l *loader) viaBrokenInclude(u *unit, name string) bool {
	for _, inc := range u.prog.Includes {
		if inc.Program == nil || !strings.HasPrefix(name, inc.Program.Name+".") {
			continue
		}
		if iu := l.byPrg[inc.Program]; iu != nil && iu.failed {
			return true
		}
	}
	return false
}

func typesOf(s *scope) map[string]any         { return s.types }
func constsOf(s *scope) map[string]*Const     { return s.consts }
func servicesOf(s *scope) map[string]*Service { return s.services }
func (l *loader) unitOf(p *Program) *unit     { return l.byPrg[p] }

// isNamed tells user-declared type references from base and container types.
func isNamed(t *Type) bool {
	_, base := baseKinds[t.Name]
	return !base && t.Kind != KindMap && t.Kind != KindSet && t.Kind != KindList
}

// resolved is false for a named type whose declaration was not found (or
// whose typedef was cut out of a cycle); checks skip those, the error for
// them has already been reported.
func resolved(t *Type) bool {
	return !isNamed(t) || t.Struct != nil || t.Enum != nil || t.Typedef != nil
}

func setType(t *Type, decl any) {
	switch d := decl.(type) {
	case *Struct:
		t.Kind, t.Struct = KindStruct, d
	case *Enum:
		t.Kind, t.Enum = KindEnum, d
	case *Typedef:
		t.Kind, t.Typedef = KindTypedef, d
	}
}

// resolve binds type names and extends clauses of u.
func (l *loader) resolve(u *unit) {
	for _, t := range u.typeRefs {
		decl, ok := lookup(l, u, t.Name, typesOf)
		if !ok && l.viaBrokenInclude(u, t.Name) {
			continue
		}
		if !ok {
			msg := fmt.Sprintf("unknown type %q", t.Name)
			if _, isSvc := lookup(l, u, t.Name, servicesOf); isSvc {
				msg = fmt.Sprintf("%q is a service, not a type", t.Name)
			} else if _, isConst := lookup(l, u, t.Name, constsOf); isConst {
				msg = fmt.Sprintf("%q is a constant, not a type", t.Name)
			}
			l.diags.errorf(ErrUnknown, t.Pos, msg)
			continue
		}
		setType(t, decl)
	}
	l.typedefCycles(u)
	for _, s := range u.prog.Services {
		if s.ExtendsName == "" {
			continue
		}
		base, ok := lookup(l, u, s.ExtendsName, servicesOf)
		if !ok && l.viaBrokenInclude(u, s.ExtendsName) {
			continue
		}
		if !ok {
			l.diags.errorf(ErrUnknown, toPos(u.sources[s].Extends.Pos), fmt.Sprintf(
				"service %s extends unknown service %q", s.Name, s.ExtendsName))
			continue
		}
		s.Extends = base
	}
	for _, s := range u.prog.Services {
		seen := map[*Service]bool{s: true}
		chain := []string{s.Name}
		for b := s.Extends; b != nil; b = b.Extends {
			chain = append(chain, b.Name)
			if seen[b] {
				l.diags.errorf(ErrService, toPos(u.sources[s].Extends.Pos), "service inheritance cycle: "+strings.Join(chain, " -> "))
				s.Extends = nil // keep AllFunctions finite for callers that ignore the error
				break
			}
			seen[b] = true
		}
	}
}

// typedefCycles reports typedefs that (indirectly) name themselves and cuts
// the loop so that TrueType terminates.
func (l *loader) typedefCycles(u *unit) {
	for _, td := range u.prog.Typedefs {
		seen := map[*Typedef]bool{td: true}
		chain := []string{td.Name}
		for t := td.Type; t != nil && t.Kind == KindTypedef && t.Typedef != nil; t = t.Typedef.Type {
			chain = append(chain, t.Typedef.Name)
			if t.Typedef == td {
				l.diags.errorf(ErrType, td.Pos, "typedef cycle: "+strings.Join(chain, " -> "))
				td.Type.Typedef = nil
				break
			}
			if seen[t.Typedef] {
				break // a cycle not through td; reported when its own typedef is visited
			}
			seen[t.Typedef] = true
		}
	}
}

// check runs the semantic checks that need every name resolved.
func (l *loader) check(u *unit) {
	cc := &constChecker{l: l, state: map[*Const]int{}}
	for _, c := range u.prog.Consts {
		cc.checkDecl(c)
	}
	for _, s := range u.prog.Structs {
		for _, f := range s.Fields {
			if f.Default != nil && resolved(f.Type) {
				cc.value(u, f.Type, f.Default)
			}
		}
	}
	for _, s := range u.prog.Services {
		l.checkService(u, cc, s)
	}
}

func (l *loader) checkService(u *unit, cc *constChecker, s *Service) {
	inherited := map[string]*Function{}
	for _, f := range s.Extends.AllFunctions() {
		inherited[f.Name] = f
	}
	own := map[string]*Function{}
	for _, f := range s.Functions {
		if prev, ok := own[f.Name]; ok {
			l.diags.errorf(ErrDuplicate, f.Pos, fmt.Sprintf(
				"duplicate function name %q in service %s (first declared at %s)", f.Name, s.Name, prev.Pos))
		} else if prev, ok := inherited[f.Name]; ok {
			l.diags.errorf(ErrDuplicate, f.Pos, fmt.Sprintf(
				"duplicate function name %q in service %s: already inherited from service %s (%s)",
				f.Name, s.Name, prev.Service.Name, prev.Pos))
		}
		own[f.Name] = f
		l.checkStream(s, f)
		for _, a := range f.Args {
			if a.Default != nil && resolved(a.Type) {
				cc.value(u, a.Type, a.Default)
			}
		}
		for _, t := range f.Throws {
			if !resolved(t.Type) {
				continue
			}
			tt := t.Type.TrueType()
			if tt.Kind != KindStruct || tt.Struct == nil || tt.Struct.Kind != StructKindException {
				l.diags.errorf(ErrService, t.Type.Pos, fmt.Sprintf(
					"throws field %q of function %s.%s has type %s, which is not an exception", t.Name, s.Name, f.Name, t.Type.Name))
			}
		}
	}
}
