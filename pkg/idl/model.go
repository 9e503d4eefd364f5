// Package idl parses hint-extended Apache Thrift IDL and resolves it into a
// typed model that code generators and the hint resolver consume.
package idl

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/stream"
)

// Pos is a source position; String renders the `file:line:col` prefix that
// every diagnostic of the project carries.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Annotation is a Thrift `( key = "value" )` annotation.
type Annotation struct {
	Key   string
	Value string
	Pos   Pos
}

// Program is one resolved .thrift file.
type Program struct {
	Path        string            // path as given or resolved (used in diagnostics)
	Name        string            // base name without .thrift; the include prefix
	Namespaces  map[string]string // scope ("go", "*", "py", ...) -> namespace
	Includes    []*Include
	CppIncludes []string
	Typedefs    []*Typedef
	Consts      []*Const
	Enums       []*Enum
	Structs     []*Struct // structs, unions and exceptions in declaration order
	Services    []*Service
}

// Include is an `include "x.thrift"` with its resolved program.
type Include struct {
	Path    string // as written
	Program *Program
	Pos     Pos
}

// TypeKind classifies a Type after typedef resolution is available via TrueType.
type TypeKind int

const (
	KindVoid TypeKind = iota
	KindBool
	KindI8 // `byte` and `i8`
	KindI16
	KindI32
	KindI64
	KindDouble
	KindString
	KindBinary
	KindUUID
	KindList
	KindSet
	KindMap
	KindStruct  // struct, union or exception; see Type.Struct
	KindEnum    // see Type.Enum
	KindTypedef // see Type.Typedef; TrueType follows the chain
)

// Type is a type reference as written, with its resolution filled in.
type Type struct {
	Kind        TypeKind
	Name        string // as written: "i32", "Foo", "shared.Bar"
	Elem        *Type  // list/set element, map value
	Key         *Type  // map key
	Struct      *Struct
	Enum        *Enum
	Typedef     *Typedef
	Annotations []Annotation
	Pos         Pos
}

// TrueType follows typedef chains to the underlying type.
func (t *Type) TrueType() *Type {
	for t != nil && t.Kind == KindTypedef && t.Typedef != nil {
		t = t.Typedef.Type
	}
	return t
}

// Requiredness of a field.
type Requiredness int

const (
	Default Requiredness = iota
	Required
	Optional
)

// Field is a struct field, function argument or throws entry.
type Field struct {
	ID          int  // explicit id, or the negative auto-assigned id Apache uses
	ExplicitID  bool // false when the id was auto-assigned (legacy)
	Name        string
	Type        *Type
	Req         Requiredness
	Default     *ConstValue
	Annotations []Annotation
	Doc         string
	Pos         Pos
}

// StructKind tells structs, unions and exceptions apart.
type StructKind int

const (
	StructKindStruct StructKind = iota
	StructKindUnion
	StructKindException
)

// Struct is a struct, union or exception declaration.
type Struct struct {
	Kind        StructKind
	Name        string
	Fields      []*Field
	Annotations []Annotation
	Doc         string
	Pos         Pos
	Program     *Program
}

// Enum is an enum (or senum, with Senum set and no values).
type Enum struct {
	Name        string
	Values      []*EnumValue
	Senum       bool
	SenumValues []string
	Annotations []Annotation
	Doc         string
	Pos         Pos
	Program     *Program
}

// EnumValue is one enumerator with its explicit or implied value.
type EnumValue struct {
	Name        string
	Value       int64
	Annotations []Annotation
	Doc         string
	Pos         Pos
	Enum        *Enum
}

// Typedef is `typedef T Name`.
type Typedef struct {
	Name        string
	Type        *Type
	Annotations []Annotation
	Doc         string
	Pos         Pos
	Program     *Program
}

// Const is `const T Name = value`.
type Const struct {
	Name        string
	Type        *Type
	Value       *ConstValue
	Annotations []Annotation
	Doc         string
	Pos         Pos
	Program     *Program
}

// ConstValueKind classifies constant literals.
type ConstValueKind int

const (
	ConstInt ConstValueKind = iota
	ConstDouble
	ConstString
	ConstList
	ConstMap
	ConstIdent // a reference to an enum value or another constant
)

// ConstValue is a constant literal; after resolution identifiers point to
// what they name.
type ConstValue struct {
	Kind      ConstValueKind
	Int       int64
	Double    float64
	String    string
	List      []*ConstValue
	Map       []ConstPair
	Ident     string     // as written, for ConstIdent
	EnumValue *EnumValue // resolved ConstIdent naming an enum value
	Const     *Const     // resolved ConstIdent naming a constant
	Pos       Pos
}

// ConstPair is one entry of a map literal.
type ConstPair struct {
	Key, Value *ConstValue
}

// Service is a service declaration.
type Service struct {
	Name        string
	ExtendsName string // as written, "" if none
	Extends     *Service
	Hints       []*HintGroup // service-level hint groups in source order
	Functions   []*Function  // own functions, in source order
	Annotations []Annotation
	Doc         string
	Pos         Pos
	Program     *Program
}

// AllFunctions returns inherited functions first (root ancestor first), then
// the service's own, as Apache's generators order them.
func (s *Service) AllFunctions() []*Function {
	if s == nil {
		return nil
	}
	out := append([]*Function(nil), s.Extends.AllFunctions()...)
	return append(out, s.Functions...)
}

// Function is one RPC function.
type Function struct {
	Name        string
	Oneway      bool
	Returns     *Type // nil for void
	Args        []*Field
	Throws      []*Field
	Hints       []*HintGroup // function-level hint groups (inside `[ ... ]`)
	Annotations []Annotation
	Doc         string
	Pos         Pos
	Service     *Service // the declaring service
	// Stream is how the function streams, from its `(streaming.mode="...")`
	// annotation (stream.AnnotationKey; stream.None: unary). A streaming
	// function takes one struct and returns a struct: the client's and the
	// server's messages (docs/design/streams.md).
	Stream stream.Mode
}

// HintSide says which side a hint group applies to.
type HintSide int

const (
	HintShared HintSide = iota // `hint:`
	HintServer                 // `s_hint:`
	HintClient                 // `c_hint:`
)

// HintGroup is one `hint: k=v, ...;` group.
type HintGroup struct {
	Side    HintSide
	Entries []*HintEntry
	Pos     Pos
}

// HintValueKind is the lexical kind of a hint value.
type HintValueKind int

const (
	HintIdent  HintValueKind = iota // latency, direct_write_imm, auto
	HintNumber                      // 64, 1.5
	HintSize                        // 4KB, 4KiB, 1MB (number with unit suffix)
	HintString                      // "quoted"
)

// HintEntry is one `key=value`; Key may be dotted for application hints.
type HintEntry struct {
	Key      string
	Value    string // raw text; for HintString, the unquoted contents
	Kind     HintValueKind
	Pos      Pos // position of the key
	ValuePos Pos
}
