package idl

import (
	"fmt"
	"math"
	"strings"
)

// constChecker validates constant values against their declared types
// (Apache's validate_const_rec) and binds identifiers to what they name.
type constChecker struct {
	l     *loader
	state map[*Const]int // 0 unchecked, 1 in progress, 2 done
}

func (c *constChecker) errorf(p Pos, format string, args ...any) {
	c.l.diags.errorf(ErrConstValue, p, fmt.Sprintf(format, args...))
}

func (c *constChecker) checkDecl(k *Const) {
	if c.state[k] != 0 {
		return
	}
	c.state[k] = 1
	if resolved(k.Type) {
		c.value(c.l.unitOf(k.Program), k.Type, k.Value)
	}
	c.state[k] = 2
}

var intRanges = map[TypeKind][2]int64{
	KindI8:  {math.MinInt8, math.MaxInt8},
	KindI16: {math.MinInt16, math.MaxInt16},
	KindI32: {math.MinInt32, math.MaxInt32},
	KindI64: {math.MinInt64, math.MaxInt64},
}

func isInt(k TypeKind) bool { _, ok := intRanges[k]; return ok }

// describeValue renders a literal for messages: `string "abc"`, `300`.
func describeValue(v *ConstValue) string {
	switch v.Kind {
	case ConstInt:
		return fmt.Sprintf("integer %d", v.Int)
	case ConstDouble:
		return fmt.Sprintf("double %g", v.Double)
	case ConstString:
		return fmt.Sprintf("string %q", v.String)
	case ConstList:
		return "list literal"
	case ConstMap:
		return "map literal"
	}
	return v.Ident
}

// value checks v against type t; u is the unit whose names v may use.
func (c *constChecker) value(u *unit, t *Type, v *ConstValue) {
	tt := t.TrueType()
	if tt == nil || !resolved(tt) {
		return
	}
	if v.Kind == ConstIdent {
		c.ident(u, t, tt, v)
		return
	}
	mismatch := func() { c.errorf(v.Pos, "cannot use %s as %s value", describeValue(v), t.Name) }
	switch tt.Kind {
	case KindBool:
		if v.Kind != ConstInt || (v.Int != 0 && v.Int != 1) {
			mismatch()
		}
	case KindI8, KindI16, KindI32, KindI64:
		if v.Kind != ConstInt {
			mismatch()
			return
		}
		r := intRanges[tt.Kind]
		if v.Int < r[0] || v.Int > r[1] {
			c.errorf(v.Pos, "value %d out of range for %s (%d..%d)", v.Int, t.Name, r[0], r[1])
		}
	case KindDouble:
		if v.Kind != ConstInt && v.Kind != ConstDouble {
			mismatch()
		}
	case KindString, KindBinary:
		if v.Kind != ConstString {
			mismatch()
		}
	case KindUUID:
		if v.Kind != ConstString {
			mismatch()
		} else if !validUUID(v.String) {
			c.errorf(v.Pos, "invalid uuid %q (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", v.String)
		}
	case KindEnum:
		c.enumValue(t, tt.Enum, v)
	case KindList, KindSet:
		// Apache accepts `{}` as an empty set or list (ThriftTest.thrift does).
		if v.Kind == ConstMap && len(v.Map) == 0 {
			v.Kind, v.Map, v.List = ConstList, nil, []*ConstValue{}
		}
		if v.Kind != ConstList {
			mismatch()
			return
		}
		for _, e := range v.List {
			c.value(u, tt.Elem, e)
		}
	case KindMap:
		if v.Kind == ConstList && len(v.List) == 0 {
			v.Kind, v.List, v.Map = ConstMap, nil, []ConstPair{}
		}
		if v.Kind != ConstMap {
			mismatch()
			return
		}
		for _, p := range v.Map {
			c.value(u, tt.Key, p.Key)
			c.value(u, tt.Elem, p.Value)
		}
	case KindStruct:
		c.structValue(u, t, tt.Struct, v)
	}
}

func (c *constChecker) enumValue(t *Type, e *Enum, v *ConstValue) {
	if e.Senum {
		if v.Kind != ConstString {
			c.errorf(v.Pos, "cannot use %s as %s value", describeValue(v), t.Name)
		}
		return
	}
	if v.Kind != ConstInt {
		c.errorf(v.Pos, "cannot use %s as %s value", describeValue(v), t.Name)
		return
	}
	for _, ev := range e.Values {
		if ev.Value == v.Int {
			v.EnumValue = ev
			return
		}
	}
	c.errorf(v.Pos, "value %d is not a member of enum %s", v.Int, e.Name)
}

func (c *constChecker) structValue(u *unit, t *Type, s *Struct, v *ConstValue) {
	if v.Kind != ConstMap {
		c.errorf(v.Pos, "cannot use %s as %s value", describeValue(v), t.Name)
		return
	}
	for _, p := range v.Map {
		if p.Key.Kind != ConstString {
			c.errorf(p.Key.Pos, "field names in a constant of type %s must be strings, not %s", t.Name, describeValue(p.Key))
			continue
		}
		var field *Field
		for _, f := range s.Fields {
			if f.Name == p.Key.String {
				field = f
				break
			}
		}
		if field == nil {
			c.errorf(p.Key.Pos, "%s has no field %q", t.Name, p.Key.String)
			continue
		}
		if resolved(field.Type) {
			c.value(u, field.Type, p.Value)
		}
	}
}

// ident binds an identifier value to an enum value or a constant and checks
// that what it names fits t (tt is t's true type).
func (c *constChecker) ident(u *unit, t, tt *Type, v *ConstValue) {
	name := v.Ident
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		if decl, ok := lookup(c.l, u, name[:i], typesOf); ok {
			if e, isEnum := decl.(*Enum); isEnum && !e.Senum {
				if ev := wrongPrefix(tt, e, name[i+1:]); ev != nil {
					c.l.diags.warnf(v.Pos, fmt.Sprintf("%s: %s is a value of %s, not of %s; read as %s.%s, as Apache's compiler does",
						name, ev.Name, ev.Enum.Name, e.Name, ev.Enum.Name, ev.Name))
					v.EnumValue = ev
					return
				}
				for _, ev := range e.Values {
					if ev.Name == name[i+1:] {
						v.EnumValue = ev
						c.enumRef(t, tt, v)
						return
					}
				}
				if _, isConst := lookup(c.l, u, name, constsOf); !isConst {
					c.errorf(v.Pos, "unknown enum value %q in enum %s", name[i+1:], e.Name)
					return
				}
			}
		}
	}
	if k, ok := lookup(c.l, u, name, constsOf); ok {
		v.Const = k
		c.constRef(t, tt, v, k)
		return
	}
	// A bare enumerator is accepted when the expected type is that enum.
	if tt.Kind == KindEnum && !tt.Enum.Senum {
		for _, ev := range tt.Enum.Values {
			if ev.Name == name {
				v.EnumValue = ev
				return
			}
		}
		c.errorf(v.Pos, "unknown enum value %q in enum %s", name, tt.Enum.Name)
		return
	}
	if !c.l.viaBrokenInclude(u, name) {
		c.errorf(v.Pos, "unknown constant or enum value %q", name)
	}
}

// wrongPrefix finds the value an enum-typed default or constant written
// with another enum's prefix means. Apache's compiler looks only at the
// last part of the name, in the expected enum: `MyEnum2 x =
// MyEnum1.ME2_2` is MyEnum2.ME2_2 there, and hatgen follows it (with a
// warning) so that IDL Apache accepts is accepted here too.
func wrongPrefix(tt *Type, written *Enum, value string) *EnumValue {
	if tt.Kind != KindEnum || tt.Enum.Senum || tt.Enum == written {
		return nil
	}
	for _, ev := range tt.Enum.Values {
		if ev.Name == value {
			return ev
		}
	}
	return nil
}

func (c *constChecker) enumRef(t, tt *Type, v *ConstValue) {
	ev := v.EnumValue
	switch {
	case tt.Kind == KindEnum && tt.Enum == ev.Enum:
	case isInt(tt.Kind):
		r := intRanges[tt.Kind]
		if ev.Value < r[0] || ev.Value > r[1] {
			c.errorf(v.Pos, "value %d of %s out of range for %s (%d..%d)", ev.Value, v.Ident, t.Name, r[0], r[1])
		}
	default:
		c.errorf(v.Pos, "cannot use enum value %s (enum %s) as %s value", v.Ident, ev.Enum.Name, t.Name)
	}
}

func (c *constChecker) constRef(t, tt *Type, v *ConstValue, k *Const) {
	if c.state[k] == 1 {
		c.errorf(v.Pos, "constant %q is defined in terms of itself", k.Name)
		return
	}
	c.checkDecl(k)
	if !resolved(k.Type) {
		return
	}
	kt := k.Type.TrueType()
	switch {
	case sameType(kt, tt):
	case isInt(tt.Kind) && (isInt(kt.Kind) || kt.Kind == KindEnum):
		if n, ok := constInt(k.Value); ok {
			r := intRanges[tt.Kind]
			if n < r[0] || n > r[1] {
				c.errorf(v.Pos, "value %d of constant %s out of range for %s (%d..%d)", n, k.Name, t.Name, r[0], r[1])
			}
		}
	case tt.Kind == KindDouble && isInt(kt.Kind):
	default:
		c.errorf(v.Pos, "cannot use constant %s of type %s as %s value", k.Name, k.Type.Name, t.Name)
	}
}

// constInt follows constant references down to an integer value.
func constInt(v *ConstValue) (int64, bool) {
	for i := 0; v != nil && i < 64; i++ {
		switch {
		case v.Kind == ConstInt:
			return v.Int, true
		case v.EnumValue != nil:
			return v.EnumValue.Value, true
		case v.Const != nil:
			v = v.Const.Value
		default:
			return 0, false
		}
	}
	return 0, false
}

// sameType compares true types structurally.
func sameType(a, b *Type) bool {
	a, b = a.TrueType(), b.TrueType()
	if a == nil || b == nil || a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case KindStruct:
		return a.Struct == b.Struct
	case KindEnum:
		return a.Enum == b.Enum
	case KindList, KindSet:
		return sameType(a.Elem, b.Elem)
	case KindMap:
		return sameType(a.Key, b.Key) && sameType(a.Elem, b.Elem)
	}
	return true
}

func validUUID(s string) bool {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return false
			}
			continue
		}
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}
