package hints

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Side is one end of a call.
type Side int

const (
	SideClient Side = iota
	SideServer
)

func (s Side) String() string { return enumString([]string{"client", "server"}, "Side", int(s)) }

// Level is where a resolved value came from, least specific first.
type Level int

const (
	LevelDefault        Level = iota // built-in default
	LevelServiceShared               // service `hint:`
	LevelServiceSide                 // service `s_hint:` / `c_hint:`
	LevelFunctionShared              // function `hint:`
	LevelFunctionSide                // function `s_hint:` / `c_hint:`
)

func (l Level) String() string {
	return enumString([]string{"default", "service hint", "service side hint", "function hint", "function side hint"}, "Level", int(l))
}

// Origin says where a value came from: the entry's position and level, or
// the built-in default.
type Origin struct {
	Level Level
	Group RawSide // group keyword of the entry (meaningless for LevelDefault)
	Pos   Pos     // position of the entry's key
}

// IsDefault reports whether the value is the built-in default.
func (o Origin) IsDefault() bool { return o.Level == LevelDefault }

// String renders "default" or the entry's `file:line:col`.
func (o Origin) String() string {
	if o.IsDefault() {
		return "default"
	}
	return o.Pos.String()
}

// Describe renders the origin for humans, e.g. "a.thrift:3:9 (function c_hint)".
func (o Origin) Describe() string {
	switch o.Level {
	case LevelDefault:
		return "default"
	case LevelServiceShared, LevelServiceSide:
		return fmt.Sprintf("%s (service %s)", o.Pos, o.Group)
	}
	return fmt.Sprintf("%s (function %s)", o.Pos, o.Group)
}

// Value is one resolved key of one side.
type Value struct {
	Key    string // canonical key name, or the dotted application key
	Value  string // canonical spelling (sizes as 4KiB, durations as 50us)
	Raw    string // as written; "" for defaults
	App    bool   // an application (dotted) key
	Origin Origin
}

// Resolved is the resolution of one side: the typed Set and, for every
// schema key (in schema order) and then every application key (sorted),
// the value and its origin.
type Resolved struct {
	Set    Set
	Values []Value
}

// Lookup returns the resolved value of key (canonical name, alias or
// application key).
func (r *Resolved) Lookup(key string) (Value, bool) {
	if k, ok := LookupKey(key); ok {
		key = k.Name
	}
	for _, v := range r.Values {
		if v.Key == key {
			return v, true
		}
	}
	return Value{}, false
}

// FunctionResolution is one function's resolution.
type FunctionResolution struct {
	Name           string
	Pos            Pos
	Client, Server Resolved
}

// Side returns the resolution of one side.
func (f *FunctionResolution) Side(s Side) *Resolved {
	if s == SideServer {
		return &f.Server
	}
	return &f.Client
}

// Resolution is the result of Resolve: the service level and every function.
type Resolution struct {
	Name           string
	Client, Server Resolved // service level
	Functions      []FunctionResolution
}

// Function returns the named function's resolution, nil if unknown.
func (r *Resolution) Function(name string) *FunctionResolution {
	for i := range r.Functions {
		if r.Functions[i].Name == name {
			return &r.Functions[i]
		}
	}
	return nil
}

// Lookup returns the value of key on one side of function fn ("" for the
// service level).
func (r *Resolution) Lookup(fn string, side Side, key string) (Value, bool) {
	res := &r.Client
	if side == SideServer {
		res = &r.Server
	}
	if fn != "" {
		f := r.Function(fn)
		if f == nil {
			return Value{}, false
		}
		res = f.Side(side)
	}
	return res.Lookup(key)
}

// Service builds the runtime table generated code embeds, so that generated
// tables and `hatgen explain` come from the same resolution.
func (r *Resolution) Service() Service {
	s := Service{Name: r.Name, Client: r.Client.Set, Server: r.Server.Set}
	for _, f := range r.Functions {
		s.Functions = append(s.Functions, Function{Name: f.Name, Client: f.Client.Set, Server: f.Server.Set})
	}
	return s
}

// Error is one resolver diagnostic; it renders `file:line:col: message` and
// matches its kind (ErrUnknownKey, ErrBadValue, ...) with errors.Is.
type Error struct {
	Pos  Pos
	Msg  string
	Kind error
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

func (e *Error) Unwrap() error { return e.Kind }

// Errors is every problem Resolve found, in source order of the groups.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is / errors.As look at every element.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// entry is one validated entry at one level.
type entry struct {
	key   string // canonical key
	desc  *Key   // nil for application keys
	value string // canonical value
	raw   RawEntry
	group RawSide
}

// level holds the validated entries of one (scope, group side), keyed by
// canonical key.
type level map[string]*entry

type resolver struct {
	errs Errors
}

func (r *resolver) errorf(p Pos, kind error, format string, args ...any) {
	r.errs = append(r.errs, &Error{Pos: p, Msg: fmt.Sprintf(format, args...), Kind: kind})
}

// levels validates groups of one scope and splits them into the shared,
// server and client levels (indexed by RawSide).
func (r *resolver) levels(groups []RawGroup, fn string) [3]level {
	var out [3]level
	for i := range out {
		out[i] = level{}
	}
	for _, g := range groups {
		if g.Side < RawShared || g.Side > RawClient {
			r.errorf(g.Pos, ErrSide, "invalid hint group side %d", int(g.Side))
			continue
		}
		for _, e := range g.Entries {
			if ent := r.check(e, g.Side, fn); ent != nil {
				r.add(out[g.Side], ent)
			}
		}
	}
	return out
}

// check validates one entry; nil means it was rejected (and reported).
func (r *resolver) check(e RawEntry, side RawSide, fn string) *entry {
	desc, ok := LookupKey(e.Key)
	if !ok {
		if appKeyValid(e.Key) {
			return &entry{key: e.Key, value: e.Value, raw: e, group: side}
		}
		if s := suggest(e.Key); s != "" {
			r.errorf(e.Pos, ErrUnknownKey, "unknown hint %q (did you mean %q?)", e.Key, s)
		} else {
			r.errorf(e.Pos, ErrUnknownKey, "unknown hint %q (application hints need a dotted prefix, e.g. %q)", e.Key, "app."+e.Key)
		}
		return nil
	}
	if fn != "" && desc.Scope == ScopeService {
		r.errorf(e.Pos, ErrScope, "hint %q is not allowed on function %s: it is service-level only", e.Key, fn)
		return nil
	}
	if (side == RawServer && desc.Side == SideClientOnly) || (side == RawClient && desc.Side == SideServerOnly) {
		r.errorf(e.Pos, ErrSide, "hint %q is not allowed in %s: it is %s-side only", e.Key, side, desc.Side)
		return nil
	}
	var scratch Set
	val, err := desc.apply(&scratch, e.Value)
	if err != nil {
		var ve *ValueError
		var re *RangeError
		switch {
		case errors.As(err, &re):
			r.errorf(e.ValuePos, ErrRange, "bad value %q for %s: %s", e.Value, e.Key, re.Msg)
		case errors.As(err, &ve):
			r.errorf(e.ValuePos, ErrBadValue, "bad value %q for %s: want %s", e.Value, e.Key, ve.Want)
		default:
			r.errorf(e.ValuePos, ErrBadValue, "bad value %q for %s: %v", e.Value, e.Key, err)
		}
		return nil
	}
	return &entry{key: desc.Name, desc: &schema[keyIndex[desc.Name]], value: val, raw: e, group: side}
}

// add records ent at its level; a second entry for the same canonical key
// is a duplicate (same value) or a conflict (different value), and the
// first one stays in effect.
func (r *resolver) add(l level, ent *entry) {
	prev, ok := l[ent.key]
	if !ok {
		l[ent.key] = ent
		return
	}
	here, there := entryText(ent.raw), entryText(prev.raw)
	if prev.value == ent.value {
		r.errorf(ent.raw.Pos, ErrDuplicate, "duplicate hint %s (already set at %s)", here, prev.raw.Pos)
		return
	}
	r.errorf(ent.raw.Pos, ErrConflict, "conflicting values for %s: %s here, %s at %s", ent.key, here, there, prev.raw.Pos)
}

// entryText renders key=value for a diagnostic, quoting values that are not
// plain words so a string value cannot break the one-line-per-error format.
func entryText(e RawEntry) string {
	v := e.Value
	plain := v != ""
	for _, c := range v {
		if !(c == '_' || c == '.' || c == '-' || c == '%' || c == 'µ' ||
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			plain = false
			break
		}
	}
	if !plain {
		v = strconv.Quote(v)
	}
	return e.Key + "=" + v
}

// Resolve validates the hint groups of one service and its functions and
// resolves every (function, side, key), most specific first: function
// side-specific > function shared > service side-specific > service shared
// > built-in default. Problems are collected, not stopped at: the error is
// an Errors listing all of them, and the Resolution returned alongside is
// built from the valid entries only.
func Resolve(service string, serviceGroups []RawGroup, funcs []RawFunction) (*Resolution, error) {
	var r resolver
	svc := r.levels(serviceGroups, "")
	res := &Resolution{Name: service}
	res.Client = build(SideClient, svc, [3]level{})
	res.Server = build(SideServer, svc, [3]level{})
	for _, f := range funcs {
		fl := r.levels(f.Groups, f.Name)
		res.Functions = append(res.Functions, FunctionResolution{
			Name:   f.Name,
			Pos:    f.Pos,
			Client: build(SideClient, svc, fl),
			Server: build(SideServer, svc, fl),
		})
	}
	if len(r.errs) > 0 {
		return res, r.errs
	}
	return res, nil
}

// build resolves one side from the service and function levels.
func build(side Side, svc, fn [3]level) Resolved {
	own := RawClient
	if side == SideServer {
		own = RawServer
	}
	// Most specific first.
	chain := []struct {
		l   level
		lvl Level
	}{
		{fn[own], LevelFunctionSide},
		{fn[RawShared], LevelFunctionShared},
		{svc[own], LevelServiceSide},
		{svc[RawShared], LevelServiceShared},
	}
	find := func(key string) (*entry, Level) {
		for _, c := range chain {
			if e, ok := c.l[key]; ok {
				return e, c.lvl
			}
		}
		return nil, LevelDefault
	}
	out := Resolved{Values: make([]Value, 0, len(schema))}
	for i := range schema {
		k := &schema[i]
		e, lvl := find(k.Name)
		if e == nil || !k.Side.allows(side) {
			// A one-sided key in a shared group does not reach the other side.
			out.Values = append(out.Values, Value{Key: k.Name, Value: k.Default})
			continue
		}
		// Validated already, so apply cannot fail here.
		_, _ = k.apply(&out.Set, e.raw.Value)
		out.Values = append(out.Values, Value{Key: k.Name, Value: e.value, Raw: e.raw.Value,
			Origin: Origin{Level: lvl, Group: e.group, Pos: e.raw.Pos}})
	}
	appKeys := map[string]bool{}
	for _, c := range chain {
		for k, e := range c.l {
			if e.desc == nil {
				appKeys[k] = true
			}
		}
	}
	keys := make([]string, 0, len(appKeys))
	for k := range appKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e, lvl := find(k)
		if out.Set.App == nil {
			out.Set.App = make(map[string]string, len(keys))
		}
		out.Set.App[k] = e.value
		out.Values = append(out.Values, Value{Key: k, Value: e.value, Raw: e.raw.Value, App: true,
			Origin: Origin{Level: lvl, Group: e.group, Pos: e.raw.Pos}})
	}
	return out
}

// suggest returns the key closest to an unknown one (edit distance <= 2),
// or "".
func suggest(unknown string) string {
	best, bestD := "", 3
	lower := strings.ToLower(unknown) // keys are case-sensitive, but PERF_GOAL is an obvious slip
	for name := range keyIndex {
		if d := editDistance(lower, name); d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30 // not worth comparing; also bounds the work
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
