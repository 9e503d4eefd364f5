package idl

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"
)

// scope holds the top-level names of one program. Types, constants and
// services share one namespace: generated code would clash otherwise.
type scope struct {
	names    map[string]declInfo
	types    map[string]any // *Struct, *Enum or *Typedef
	consts   map[string]*Const
	services map[string]*Service
}

type declInfo struct {
	what string
	pos  Pos
}

func newScope() *scope {
	return &scope{names: map[string]declInfo{}, types: map[string]any{},
		consts: map[string]*Const{}, services: map[string]*Service{}}
}

var baseKinds = map[string]TypeKind{
	"void": KindVoid, "bool": KindBool, "byte": KindI8, "i8": KindI8, "i16": KindI16,
	"i32": KindI32, "i64": KindI64, "double": KindDouble, "string": KindString,
	"slist": KindString, "binary": KindBinary, "uuid": KindUUID,
}

// simpleName rejects dotted declared names as Apache does: a dot always
// means an include prefix or an enum value reference.
func (l *loader) simpleName(name string, pos Pos) {
	if strings.Contains(name, ".") {
		l.diags.errorf(ErrSyntax, pos, fmt.Sprintf("identifier %q can't have a dot", name))
	}
}

// declare enters a top-level name, reporting a clash with an earlier one.
func (l *loader) declare(u *unit, name, what string, pos Pos) bool {
	l.simpleName(name, pos)
	if prev, ok := u.scope.names[name]; ok {
		l.diags.errorf(ErrDuplicate, pos, fmt.Sprintf("duplicate name %q: already declared as %s at %s", name, prev.what, prev.pos))
		return false
	}
	u.scope.names[name] = declInfo{what: what, pos: pos}
	return true
}

func (u *unit) doc(p lexer.Position) string { return u.ast.docs[p.Offset] }

// build turns the syntax tree of u into model declarations and loads its
// includes; type names are resolved later, once every file is loaded.
func (l *loader) build(u *unit) {
	u.scope = newScope()
	p := u.prog
	for _, it := range u.ast.doc.Items {
		switch {
		case it.Include != nil:
			inc := &Include{Path: unquote(it.Include.Path.Text), Pos: toPos(it.Include.Path.Pos)}
			p.Includes = append(p.Includes, inc)
			l.include(u, inc)
		case it.CppInclude != nil:
			p.CppIncludes = append(p.CppIncludes, unquote(it.CppInclude.Path))
		case it.Namespace != nil:
			p.Namespaces[it.Namespace.Scope] = it.Namespace.Name.Name
		case it.Typedef != nil:
			a := it.Typedef
			td := &Typedef{Name: a.Name.Name, Type: l.typ(u, a.Type, false), Annotations: annotations(a.Annotations),
				Doc: u.doc(it.Pos), Pos: toPos(a.Name.Pos), Program: p}
			p.Typedefs = append(p.Typedefs, td)
			if l.declare(u, td.Name, "typedef", td.Pos) {
				u.scope.types[td.Name] = td
			}
		case it.Const != nil:
			a := it.Const
			c := &Const{Name: a.Name.Name, Type: l.typ(u, a.Type, false), Value: constValue(a.Value),
				Annotations: annotations(a.Annotations), Doc: u.doc(it.Pos), Pos: toPos(a.Name.Pos), Program: p}
			p.Consts = append(p.Consts, c)
			if l.declare(u, c.Name, "constant", c.Pos) {
				u.scope.consts[c.Name] = c
			}
		case it.Enum != nil:
			l.buildEnum(u, it.Enum, u.doc(it.Pos))
		case it.Senum != nil:
			a := it.Senum
			e := &Enum{Name: a.Name.Name, Senum: true, Annotations: annotations(a.Annotations),
				Doc: u.doc(it.Pos), Pos: toPos(a.Name.Pos), Program: p}
			for _, v := range a.Values {
				e.SenumValues = append(e.SenumValues, unquote(v))
			}
			p.Enums = append(p.Enums, e)
			if l.declare(u, e.Name, "senum", e.Pos) {
				u.scope.types[e.Name] = e
			}
		case it.Struct != nil:
			l.buildStruct(u, it.Struct, u.doc(it.Pos))
		case it.Service != nil:
			l.buildService(u, it.Service, u.doc(it.Pos))
		case it.Hint != nil:
			l.diags.errorf(ErrHintPlacement, toPos(it.Hint.Pos), fmt.Sprintf(
				"hint group %q outside of a service: hint groups go at the top of a service body or in [ ] after a function's parameters", it.Hint.Keyword+":"))
		}
	}
}

func (l *loader) buildEnum(u *unit, a *astEnum, doc string) {
	e := &Enum{Name: a.Name.Name, Annotations: annotations(a.Annotations), Doc: doc, Pos: toPos(a.Name.Pos), Program: u.prog}
	u.prog.Enums = append(u.prog.Enums, e)
	if l.declare(u, e.Name, "enum", e.Pos) {
		u.scope.types[e.Name] = e
	}
	// Apache numbering: implicit values continue from the previous one, starting at 0.
	next := int64(0)
	seen := map[string]*EnumValue{}
	for _, m := range a.Members {
		if m.Hint != nil {
			l.diags.errorf(ErrHintPlacement, toPos(m.Hint.Pos), fmt.Sprintf(
				"hint groups are not allowed in enum %s: they belong to services and functions", e.Name))
			continue
		}
		av := m.Value
		v := &EnumValue{Name: av.Name, Value: next, Annotations: annotations(av.Annotations),
			Doc: u.doc(av.Pos), Pos: toPos(av.Pos), Enum: e}
		if av.Value != nil {
			n, _ := parseInt(av.Value.Text) // the lexer already range-checked it
			if n < math.MinInt32 || n > math.MaxInt32 {
				l.diags.errorf(ErrConstValue, toPos(av.Value.Pos), fmt.Sprintf(
					"value %d of enum value %s.%s is out of range for i32", n, e.Name, v.Name))
			}
			v.Value = n
		}
		next = v.Value + 1
		l.simpleName(v.Name, v.Pos)
		if prev, ok := seen[v.Name]; ok {
			l.diags.errorf(ErrDuplicate, v.Pos, fmt.Sprintf(
				"duplicate enum value %q in enum %s (first declared at %s)", v.Name, e.Name, prev.Pos))
			continue
		}
		seen[v.Name] = v
		e.Values = append(e.Values, v)
	}
}

var structKinds = map[string]StructKind{"struct": StructKindStruct, "union": StructKindUnion, "exception": StructKindException}

func (l *loader) buildStruct(u *unit, a *astStruct, doc string) {
	s := &Struct{Kind: structKinds[a.Kind], Name: a.Name.Name, Annotations: annotations(a.Annotations),
		Doc: doc, Pos: toPos(a.Name.Pos), Program: u.prog}
	u.prog.Structs = append(u.prog.Structs, s)
	if l.declare(u, s.Name, a.Kind, s.Pos) {
		u.scope.types[s.Name] = s
	}
	var fields []*astField
	for _, m := range a.Members {
		if m.Hint != nil {
			l.diags.errorf(ErrHintPlacement, toPos(m.Hint.Pos), fmt.Sprintf(
				"hint groups are not allowed in %s %s: they belong to services and functions", a.Kind, s.Name))
			continue
		}
		fields = append(fields, m.Field)
	}
	s.Fields = l.fields(u, fields, a.Kind+" "+s.Name)
}

// fields builds one field list (struct body, argument list or throws),
// assigning Apache's negative ids to legacy fields and checking uniqueness.
func (l *loader) fields(u *unit, list []*astField, ctx string) []*Field {
	next := -1
	ids := map[int]*Field{}
	names := map[string]*Field{}
	out := make([]*Field, 0, len(list))
	for _, af := range list {
		f := &Field{Name: af.Name.Name, Type: l.typ(u, af.Type, false), Annotations: annotations(af.Annotations),
			Doc: u.doc(af.Pos), Pos: toPos(af.Pos)}
		l.simpleName(f.Name, toPos(af.Name.Pos))
		switch af.Req {
		case "required":
			f.Req = Required
		case "optional":
			f.Req = Optional
		}
		if af.Default != nil {
			f.Default = constValue(af.Default)
		}
		idPos := f.Pos
		switch {
		case af.ID == nil:
			l.diags.warnf(toPos(af.Name.Pos), fmt.Sprintf(
				"No field key specified for %s, resulting protocol may have conflicts or not be backwards compatible!", f.Name))
			f.ID = next
			next--
		default:
			idPos = toPos(af.ID.Pos)
			id, _ := parseInt(af.ID.Text)
			switch {
			case id <= 0:
				l.diags.warnf(idPos, fmt.Sprintf("Nonpositive value (%d) not allowed as a field key.", id))
				f.ID = next
				next--
			case id > math.MaxInt16:
				l.diags.errorf(ErrFieldID, idPos, fmt.Sprintf(
					"field id %d of %q in %s is out of range (1..%d)", id, f.Name, ctx, math.MaxInt16))
				f.ID, f.ExplicitID = int(id), true
			default:
				f.ID, f.ExplicitID = int(id), true
			}
		}
		if prev, ok := ids[f.ID]; ok && f.ExplicitID {
			l.diags.errorf(ErrFieldID, idPos, fmt.Sprintf(
				"duplicate field id %d in %s: %q and %q", f.ID, ctx, prev.Name, f.Name))
		} else {
			ids[f.ID] = f
		}
		if prev, ok := names[f.Name]; ok {
			l.diags.errorf(ErrDuplicate, toPos(af.Name.Pos), fmt.Sprintf(
				"duplicate field name %q in %s (first declared at %s)", f.Name, ctx, prev.Pos))
		} else {
			names[f.Name] = f
		}
		out = append(out, f)
	}
	return out
}

func (l *loader) buildService(u *unit, a *astService, doc string) {
	s := &Service{Name: a.Name.Name, Annotations: annotations(a.Annotations), Doc: doc,
		Pos: toPos(a.Name.Pos), Program: u.prog}
	if a.Extends != nil {
		s.ExtendsName = a.Extends.Name
	}
	u.prog.Services = append(u.prog.Services, s)
	u.sources[s] = a
	if l.declare(u, s.Name, "service", s.Pos) {
		u.scope.services[s.Name] = s
	}
	for _, m := range a.Members {
		if m.Hint != nil {
			if len(s.Functions) > 0 {
				l.diags.errorf(ErrHintPlacement, toPos(m.Hint.Pos), fmt.Sprintf(
					"hint groups must come before the first function of service %s", s.Name))
				continue
			}
			s.Hints = append(s.Hints, hintGroup(m.Hint))
			continue
		}
		s.Functions = append(s.Functions, l.function(u, s, m.Function))
	}
}

func (l *loader) function(u *unit, s *Service, a *astFunction) *Function {
	f := &Function{Name: a.Name.Name, Oneway: a.Oneway != "", Annotations: annotations(a.Annotations),
		Doc: u.doc(a.Pos), Pos: toPos(a.Name.Pos), Service: s}
	if a.Returns.Name != "void" {
		f.Returns = l.typ(u, a.Returns, false)
	}
	l.simpleName(f.Name, f.Pos)
	where := "function " + s.Name + "." + f.Name
	f.Args = l.fields(u, a.Args, "arguments of "+where)
	if a.Throws != nil {
		f.Throws = l.fields(u, a.Throws.Fields, "throws of "+where)
	}
	if f.Oneway && f.Returns != nil {
		l.diags.errorf(ErrService, f.Returns.Pos, fmt.Sprintf(
			"oneway function %q must return void, not %s", f.Name, f.Returns.Name))
	}
	if f.Oneway && a.Throws != nil {
		l.diags.errorf(ErrService, toPos(a.Throws.Pos), fmt.Sprintf("oneway function %q cannot throw exceptions", f.Name))
	}
	l.streamMode(f, a)
	blocks := []*astHintBlock{a.Hints, a.LateHints}
	seen := false
	for _, b := range blocks {
		if b == nil {
			continue
		}
		if seen {
			l.diags.errorf(ErrHintPlacement, toPos(b.Pos), fmt.Sprintf("function %q has more than one hint block", f.Name))
			continue
		}
		seen = true
		for _, g := range b.Groups {
			f.Hints = append(f.Hints, hintGroup(g))
		}
	}
	return f
}

func hintGroup(g *astHintGroup) *HintGroup {
	return &HintGroup{Side: g.Side, Entries: g.Entries, Pos: toPos(g.Pos)}
}

// typ converts a type expression; named types are queued for resolution.
func (l *loader) typ(u *unit, a *astType, allowVoid bool) *Type {
	t := &Type{Pos: toPos(a.Pos), Annotations: annotations(a.Annotations)}
	switch {
	case a.Map != nil:
		t.Kind, t.Key, t.Elem = KindMap, l.typ(u, a.Map.Key, false), l.typ(u, a.Map.Value, false)
		t.Name = "map<" + t.Key.Name + "," + t.Elem.Name + ">"
	case a.Set != nil:
		t.Kind, t.Elem = KindSet, l.typ(u, a.Set.Elem, false)
		t.Name = "set<" + t.Elem.Name + ">"
	case a.List != nil:
		t.Kind, t.Elem = KindList, l.typ(u, a.List.Elem, false)
		t.Name = "list<" + t.Elem.Name + ">"
	default:
		t.Name = a.Name
		k, ok := baseKinds[a.Name]
		if !ok {
			u.typeRefs = append(u.typeRefs, t)
			break
		}
		t.Kind = k
		if k == KindVoid && !allowVoid {
			l.diags.errorf(ErrType, t.Pos, `"void" is only allowed as a function return type`)
		}
	}
	return t
}

func annotations(a *astAnnotations) []Annotation {
	if a == nil {
		return nil
	}
	out := make([]Annotation, 0, len(a.Items))
	for _, it := range a.Items {
		v := "1" // Apache's value for a bare `(key)` annotation
		if it.Value != nil {
			v = unquote(*it.Value)
		}
		out = append(out, Annotation{Key: it.Key, Value: v, Pos: toPos(it.Pos)})
	}
	return out
}

func constValue(a *astConstValue) *ConstValue {
	v := &ConstValue{Pos: toPos(a.Pos)}
	switch {
	case a.Int != nil:
		v.Kind = ConstInt
		v.Int, _ = parseInt(*a.Int)
	case a.Float != nil:
		v.Kind = ConstDouble
		v.Double, _ = strconv.ParseFloat(*a.Float, 64)
	case a.Str != nil:
		v.Kind, v.String = ConstString, unquote(*a.Str)
	case a.Bool != nil:
		// Apache lexes true/false as the integers 1/0.
		v.Kind = ConstInt
		if *a.Bool == "true" {
			v.Int = 1
		}
	case a.Ident != nil:
		v.Kind, v.Ident = ConstIdent, *a.Ident
	case a.List != nil:
		v.Kind = ConstList
		v.List = make([]*ConstValue, 0, len(a.List.Items))
		for _, it := range a.List.Items {
			v.List = append(v.List, constValue(it))
		}
	case a.Map != nil:
		v.Kind = ConstMap
		v.Map = make([]ConstPair, 0, len(a.Map.Entries))
		for _, e := range a.Map.Entries {
			v.Map = append(v.Map, ConstPair{Key: constValue(e.Key), Value: constValue(e.Value)})
		}
	}
	return v
}
