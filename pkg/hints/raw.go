// Package hints defines HatRPC's hint schema, resolves the hierarchical
// `hint:` / `s_hint:` / `c_hint:` groups of a service into typed per-function
// sets, and plans the RDMA protocol and polling mode from a resolved set.
//
// The package deliberately does not import pkg/idl: generated code and the
// runtime import pkg/hints, and they must not link the IDL parser. The Raw*
// types below mirror pkg/idl's HintGroup/HintEntry one to one (same field
// names, same constant order), so converting is a plain field copy.
package hints

import "fmt"

// Pos is a source position. String renders the `file:line:col` prefix every
// diagnostic of the project starts with.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// ValueKind is the lexical kind of a hint value. The order matches
// idl.HintValueKind so that ValueKind(e.Kind) converts.
type ValueKind int

const (
	ValueIdent  ValueKind = iota // latency, direct_write_imm, auto
	ValueNumber                  // 64, 1.5
	ValueSize                    // 4KB, 4KiB, 50us (number with a unit suffix)
	ValueString                  // "quoted"; Value holds the unquoted contents
)

// RawSide says which side a hint group applies to. The order matches
// idl.HintSide so that RawSide(g.Side) converts.
type RawSide int

const (
	RawShared RawSide = iota // `hint:`
	RawServer                // `s_hint:`
	RawClient                // `c_hint:`
)

func (s RawSide) String() string {
	switch s {
	case RawShared:
		return "hint"
	case RawServer:
		return "s_hint"
	case RawClient:
		return "c_hint"
	}
	return fmt.Sprintf("RawSide(%d)", int(s))
}

// RawEntry is one `key=value` as written. Key may be dotted for application
// hints (`kv.sync=nosync`), which pass through to Set.App.
type RawEntry struct {
	Key      string
	Value    string // raw text; for ValueString the unquoted contents
	Kind     ValueKind
	Pos      Pos // position of the key
	ValuePos Pos
}

// RawGroup is one `hint: k=v, ...;` group.
type RawGroup struct {
	Side    RawSide
	Entries []RawEntry
	Pos     Pos
}

// RawFunction carries the function-level groups (inside `[ ... ]`) of one
// function, in the order the service lists its functions.
type RawFunction struct {
	Name   string
	Groups []RawGroup
	Pos    Pos
}
