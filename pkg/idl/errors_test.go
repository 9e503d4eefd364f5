package idl

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadMap loads main.thrift from an in-memory file set.
func loadMap(t *testing.T, files map[string]string) (*Program, *Diagnostics, error) {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	return LoadFS(fsys, "main.thrift", []string{"inc"})
}

func TestDiagnosticsExactText(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // main.thrift is the root
		want  []string
		kind  error
	}{
		{"unknown type", map[string]string{"main.thrift": "struct Foo {\n  1: Bar b\n}\n"},
			[]string{`main.thrift:2:6: unknown type "Bar"`}, ErrUnknown},
		{"unknown type through include prefix", map[string]string{
			"main.thrift":   "include \"shared.thrift\"\nstruct Foo {\n  1: shared.Nope b\n}\n",
			"shared.thrift": "struct Yes {}\n"},
			[]string{`main.thrift:3:6: unknown type "shared.Nope"`}, ErrUnknown},
		{"service used as type", map[string]string{"main.thrift": "service S {}\nstruct Foo { 1: S s }\n"},
			[]string{`main.thrift:2:17: "S" is a service, not a type`}, ErrUnknown},
		{"duplicate field id", map[string]string{"main.thrift": "struct Foo {\n  1: i32 a,\n  1: i32 b\n}\n"},
			[]string{`main.thrift:3:3: duplicate field id 1 in struct Foo: "a" and "b"`}, ErrFieldID},
		{"duplicate argument id", map[string]string{"main.thrift": "service S {\n  void f(1: i32 a, 1: i64 b)\n}\n"},
			[]string{`main.thrift:2:20: duplicate field id 1 in arguments of function S.f: "a" and "b"`}, ErrFieldID},
		{"duplicate field name", map[string]string{"main.thrift": "struct Foo {\n  1: i32 a,\n  2: i32 a\n}\n"},
			[]string{`main.thrift:3:10: duplicate field name "a" in struct Foo (first declared at main.thrift:2:3)`}, ErrDuplicate},
		{"field id out of range", map[string]string{"main.thrift": "struct A {\n  40000: i32 x\n}\n"},
			[]string{`main.thrift:2:3: field id 40000 of "x" in struct A is out of range (1..32767)`}, ErrFieldID},
		{"missing include", map[string]string{"main.thrift": "include \"nope.thrift\"\n"},
			[]string{`main.thrift:1:9: cannot find included file "nope.thrift" (searched . and inc)`}, ErrInclude},
		{"include cycle", map[string]string{
			"main.thrift": "include \"a.thrift\"\n",
			"a.thrift":    "include \"b.thrift\"\n",
			"b.thrift":    "\ninclude \"a.thrift\"\n"},
			[]string{`b.thrift:2:9: include cycle: a.thrift -> b.thrift -> a.thrift`}, ErrInclude},
		{"string for i32", map[string]string{"main.thrift": "const i32 X = \"abc\"\n"},
			[]string{`main.thrift:1:15: cannot use string "abc" as i32 value`}, ErrConstValue},
		{"300 for byte", map[string]string{"main.thrift": "const byte Y = 300\n"},
			[]string{`main.thrift:1:16: value 300 out of range for byte (-128..127)`}, ErrConstValue},
		{"double for i16 default", map[string]string{"main.thrift": "struct S {\n  1: i16 a = 1.5\n}\n"},
			[]string{`main.thrift:2:14: cannot use double 1.5 as i16 value`}, ErrConstValue},
		{"bad argument default", map[string]string{"main.thrift": "service S {\n  void f(1: string s = 5)\n}\n"},
			[]string{`main.thrift:2:24: cannot use integer 5 as string value`}, ErrConstValue},
		{"bad list element", map[string]string{"main.thrift": "const list<i32> L = [1, \"x\"]\n"},
			[]string{`main.thrift:1:25: cannot use string "x" as i32 value`}, ErrConstValue},
		{"unknown enum value in const", map[string]string{"main.thrift": "enum E { A, B }\nconst E x = E.C\n"},
			[]string{`main.thrift:2:13: unknown enum value "C" in enum E`}, ErrConstValue},
		{"int not in enum", map[string]string{"main.thrift": "enum E { A = 1 }\nconst E x = 7\n"},
			[]string{`main.thrift:2:13: value 7 is not a member of enum E`}, ErrConstValue},
		{"unknown constant", map[string]string{"main.thrift": "const i32 X = NOPE\n"},
			[]string{`main.thrift:1:15: unknown constant or enum value "NOPE"`}, ErrConstValue},
		{"self-referential constant", map[string]string{"main.thrift": "const i32 A = B\nconst i32 B = A\n"},
			[]string{`main.thrift:2:15: constant "A" is defined in terms of itself`}, ErrConstValue},
		{"unknown struct field in constant", map[string]string{"main.thrift": "struct P { 1: i32 x }\nconst P p = {\"y\": 1}\n"},
			[]string{`main.thrift:2:14: P has no field "y"`}, ErrConstValue},
		{"unterminated struct", map[string]string{"main.thrift": "struct Foo {\n  1: i32 a\n"},
			[]string{`main.thrift:3:1: unexpected end of file: struct Foo opened at 1:12 is missing its closing "}"`}, ErrSyntax},
		{"unterminated service", map[string]string{"main.thrift": "service S {\n  void f()\n"},
			[]string{`main.thrift:3:1: unexpected end of file: service S opened at 1:11 is missing its closing "}"`}, ErrSyntax},
		{"end of file inside a type", map[string]string{"main.thrift": "struct X {\n  1: list<i32"},
			[]string{`main.thrift:2:14: unexpected end of file (expected ">") inside struct X opened at 1:10`}, ErrSyntax},
		{"unterminated constant map", map[string]string{"main.thrift": "const map<i32,i32> M = {1: 2"},
			[]string{`main.thrift:1:29: unexpected end of file: constant map opened at 1:24 is missing its closing "}"`}, ErrSyntax},
		{"struct missing brace before next definition", map[string]string{"main.thrift": "struct X {\n  1: i32 a\nstruct Y {}\n"},
			[]string{`main.thrift:3:1: unexpected "struct" inside struct X opened at 1:10: missing "}"?`}, ErrSyntax},
		{"unterminated string", map[string]string{"main.thrift": "const string s = \"abc\n"},
			[]string{`main.thrift:1:18: unterminated string literal (newline before closing quote)`}, ErrSyntax},
		{"unterminated comment", map[string]string{"main.thrift": "struct X {}\n  /* abc \n struct Y {}"},
			[]string{`main.thrift:2:3: unterminated comment (missing "*/")`}, ErrSyntax},
		{"unterminated doc comment", map[string]string{"main.thrift": "/** doc\nstruct Y {}"},
			[]string{`main.thrift:1:1: unterminated doc comment (missing "*/")`}, ErrSyntax},
		{"bad escape", map[string]string{"main.thrift": "const string S = \"a\\qb\"\n"},
			[]string{`main.thrift:1:20: invalid escape sequence "\q" in string literal`}, ErrSyntax},
		{"hint after function", map[string]string{"main.thrift": "service S {\n  void f()\n  hint: a=b;\n}\n"},
			[]string{`main.thrift:3:3: hint groups must come before the first function of service S`}, ErrHintPlacement},
		{"hint in struct", map[string]string{"main.thrift": "struct X {\n  s_hint: a=b;\n  1: i32 a\n}\n"},
			[]string{`main.thrift:2:3: hint groups are not allowed in struct X: they belong to services and functions`}, ErrHintPlacement},
		{"hint in enum", map[string]string{"main.thrift": "enum E {\n  A,\n  hint: a=b;\n}\n"},
			[]string{`main.thrift:3:3: hint groups are not allowed in enum E: they belong to services and functions`}, ErrHintPlacement},
		{"hint at top level", map[string]string{"main.thrift": "c_hint: a=b;\n"},
			[]string{`main.thrift:1:1: hint group "c_hint:" outside of a service: hint groups go at the top of a service body or in [ ] after a function's parameters`}, ErrHintPlacement},
		{"two hint blocks", map[string]string{"main.thrift": "service S {\n  void f() [hint: a=b;], [hint: c=d;]\n}\n"},
			[]string{`main.thrift:2:26: function "f" has more than one hint block`}, ErrHintPlacement},
		{"hint missing =", map[string]string{"main.thrift": "service S {\n  hint: a b;\n  void f()\n}\n"},
			[]string{`main.thrift:2:11: missing "=" after hint key "a" (found "b")`}, ErrSyntax},
		{"hint missing value", map[string]string{"main.thrift": "service S {\n  hint: a=;\n  void f()\n}\n"},
			[]string{`main.thrift:2:11: missing value for hint key "a" (found ";")`}, ErrSyntax},
		{"hint missing colon", map[string]string{"main.thrift": "service S {\n  hint a=b;\n}\n"},
			[]string{`main.thrift:2:8: missing ":" after "hint" in hint group`}, ErrSyntax},
		{"empty hint group", map[string]string{"main.thrift": "service S {\n  s_hint: ;\n}\n"},
			[]string{`main.thrift:2:11: empty hint group: expected key=value after "s_hint:"`}, ErrSyntax},
		{"hint missing separator", map[string]string{"main.thrift": "service S {\n  hint: a=b c=d;\n}\n"},
			[]string{`main.thrift:2:13: expected "," or ";" after hint a=b, found "c"`}, ErrSyntax},
		{"service hint group closed by bracket", map[string]string{"main.thrift": "service S {\n  hint: a=b ]\n}\n"},
			[]string{`main.thrift:2:13: expected "," or ";" after hint a=b, found "]"`}, ErrSyntax},
		{"garbage in function hints", map[string]string{"main.thrift": "service S {\n  void f() [ foo ]\n}\n"},
			[]string{`main.thrift:2:14: expected hint group (hint:, s_hint: or c_hint:) or "]" in function hints, found "foo"`}, ErrSyntax},
		{"duplicate type name", map[string]string{"main.thrift": "struct A {}\nenum A { X }\n"},
			[]string{`main.thrift:2:6: duplicate name "A": already declared as struct at main.thrift:1:8`}, ErrDuplicate},
		{"duplicate enum value", map[string]string{"main.thrift": "enum E {\n  X,\n  X\n}\n"},
			[]string{`main.thrift:3:3: duplicate enum value "X" in enum E (first declared at main.thrift:2:3)`}, ErrDuplicate},
		{"unknown extends", map[string]string{"main.thrift": "service S extends T {}\n"},
			[]string{`main.thrift:1:19: service S extends unknown service "T"`}, ErrUnknown},
		{"inheritance cycle", map[string]string{"main.thrift": "service A extends B {}\nservice B extends A {}\n"},
			[]string{`main.thrift:1:19: service inheritance cycle: A -> B -> A`}, ErrService},
		{"oneway non-void", map[string]string{"main.thrift": "service S {\n  oneway i32 f()\n}\n"},
			[]string{`main.thrift:2:10: oneway function "f" must return void, not i32`}, ErrService},
		{"oneway with throws", map[string]string{"main.thrift": "exception E {}\nservice S {\n  oneway void f() throws (1: E e)\n}\n"},
			[]string{`main.thrift:3:19: oneway function "f" cannot throw exceptions`}, ErrService},
		{"throws non-exception", map[string]string{"main.thrift": "struct A {}\nservice S {\n  void f() throws (1: A a)\n}\n"},
			[]string{`main.thrift:3:23: throws field "a" of function S.f has type A, which is not an exception`}, ErrService},
		{"duplicate function", map[string]string{"main.thrift": "service S {\n  void f()\n  i32 f()\n}\n"},
			[]string{`main.thrift:3:7: duplicate function name "f" in service S (first declared at main.thrift:2:8)`}, ErrDuplicate},
		{"duplicate inherited function across include", map[string]string{
			"main.thrift": "include \"base.thrift\"\nservice S extends base.T {\n  void ping()\n}\n",
			"base.thrift": "service T {\n  void ping()\n}\n"},
			[]string{`main.thrift:3:8: duplicate function name "ping" in service S: already inherited from service T (base.thrift:2:8)`}, ErrDuplicate},
		{"void field", map[string]string{"main.thrift": "struct X {\n  1: void a\n}\n"},
			[]string{`main.thrift:2:6: "void" is only allowed as a function return type`}, ErrType},
		{"typedef cycle", map[string]string{"main.thrift": "typedef A B\ntypedef B A\n"},
			[]string{`main.thrift:1:11: typedef cycle: B -> A -> B`}, ErrType},
		{"missing colon after field id", map[string]string{"main.thrift": "struct X {\n  1 i32 a\n}\n"},
			[]string{`main.thrift:2:5: unexpected "i32" (expected ":")`}, ErrSyntax},
		{"missing field name", map[string]string{"main.thrift": "struct X {\n  1: i32\n}\n"},
			[]string{`main.thrift:3:1: unexpected "}" (expected identifier)`}, ErrSyntax},
		{"missing enum value", map[string]string{"main.thrift": "enum E { A = }\n"},
			[]string{`main.thrift:1:14: unexpected "}" (expected integer)`}, ErrSyntax},
		{"size literal outside hints", map[string]string{"main.thrift": "struct X { 1: i32 a = 4KB }\n"},
			[]string{`main.thrift:1:23: unexpected "4KB" (expected constant value)`}, ErrSyntax},
		{"stray character", map[string]string{"main.thrift": "struct X {}\n@\n"},
			[]string{`main.thrift:2:1: unexpected character '@'`}, ErrSyntax},
		{"integer overflow", map[string]string{"main.thrift": "const i64 X = 99999999999999999999\n"},
			[]string{`main.thrift:1:15: integer constant 99999999999999999999 is out of range`}, ErrSyntax},
		{"bad uuid constant", map[string]string{"main.thrift": "const uuid U = \"not-a-uuid\"\n"},
			[]string{`main.thrift:1:16: invalid uuid "not-a-uuid" (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)`}, ErrConstValue},
		{"enum value of another enum", map[string]string{"main.thrift": "enum A { X }\nenum B { Y }\nconst A a = B.Y\n"},
			[]string{`main.thrift:3:13: cannot use enum value B.Y (enum B) as A value`}, ErrConstValue},
		{"stray closing brace at top level", map[string]string{"main.thrift": "struct X {}\n}\n"},
			[]string{`main.thrift:2:1: unexpected "}" (expected a definition: include, namespace, typedef, const, enum, struct, union, exception or service)`}, ErrSyntax},
		{"annotation value must be a string", map[string]string{"main.thrift": "struct X { 1: i32 a (k = v) }\n"},
			[]string{`main.thrift:1:26: unexpected "v" (expected string literal)`}, ErrSyntax},
		{"list for i32", map[string]string{"main.thrift": "const i32 X = [1, 2]\n"},
			[]string{`main.thrift:1:15: cannot use list literal as i32 value`}, ErrConstValue},
		{"2 for bool", map[string]string{"main.thrift": "const bool B = 2\n"},
			[]string{`main.thrift:1:16: cannot use integer 2 as bool value`}, ErrConstValue},
		{"bad map key", map[string]string{"main.thrift": "const map<i32,string> M = {1: \"a\", \"b\": \"c\"}\n"},
			[]string{`main.thrift:1:36: cannot use string "b" as i32 value`}, ErrConstValue},
		{"non-string struct constant key", map[string]string{"main.thrift": "struct A { 1: i32 x }\nconst A a = {1: 2}\n"},
			[]string{`main.thrift:2:14: field names in a constant of type A must be strings, not integer 1`}, ErrConstValue},
		{"enum value out of i32 range", map[string]string{"main.thrift": "enum E { A = 5000000000 }\n"},
			[]string{`main.thrift:1:14: value 5000000000 of enum value E.A is out of range for i32`}, ErrConstValue},
		{"void typedef and container", map[string]string{"main.thrift": "typedef void V\nservice S { list<void> f() }\n"},
			[]string{
				`main.thrift:1:9: "void" is only allowed as a function return type`,
				`main.thrift:2:18: "void" is only allowed as a function return type`,
			}, ErrType},
		{"each missing include reported", map[string]string{"main.thrift": "include \"a.thrift\"\ninclude \"b.thrift\"\n"},
			[]string{
				`main.thrift:1:9: cannot find included file "a.thrift" (searched . and inc)`,
				`main.thrift:2:9: cannot find included file "b.thrift" (searched . and inc)`,
			}, ErrInclude},
		{"nesting limit", map[string]string{"main.thrift": "const list<i32> L = " + strings.Repeat("[", 101) + "\n"},
			[]string{`main.thrift:1:121: brackets nested deeper than 100 levels`}, ErrSyntax},
		{"dotted declared names", map[string]string{"main.thrift": "struct a.b {\n  1: i32 c.d\n}\nservice S {\n  void f.g()\n}\nenum E { X.Y }\n"},
			[]string{
				`main.thrift:1:8: identifier "a.b" can't have a dot`,
				`main.thrift:2:10: identifier "c.d" can't have a dot`,
				`main.thrift:5:8: identifier "f.g" can't have a dot`,
				`main.thrift:7:10: identifier "X.Y" can't have a dot`,
			}, ErrSyntax},
		{"several problems in one run", map[string]string{
			"main.thrift": "struct A {\n  1: Nope x,\n  1: i32 y\n}\nconst byte B = 300\nservice S {\n  oneway i32 f()\n}\n"},
			[]string{
				`main.thrift:2:6: unknown type "Nope"`,
				`main.thrift:3:3: duplicate field id 1 in struct A: "x" and "y"`,
				`main.thrift:5:16: value 300 out of range for byte (-128..127)`,
				`main.thrift:7:10: oneway function "f" must return void, not i32`,
			}, ErrUnknown},
		{"syntax error in include does not hide root errors", map[string]string{
			"main.thrift": "include \"bad.thrift\"\nstruct A {\n  1: Missing m\n  2: bad.Thing t\n}\nconst i32 C = bad.C\nservice S extends bad.S {}\n",
			"bad.thrift":  "struct {\n"},
			[]string{
				`main.thrift:3:6: unknown type "Missing"`,
				`bad.thrift:1:8: unexpected "{" (expected identifier)`,
			}, ErrSyntax},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, diags, err := loadMap(t, tc.files)
			require.Error(t, err)
			require.NotNil(t, diags)
			got := make([]string, len(diags.Errors))
			for i, d := range diags.Errors {
				got[i] = d.Error()
			}
			assert.Equal(t, tc.want, got)
			assert.True(t, errors.Is(err, tc.kind), "error should match %v", tc.kind)
			var d *Diagnostic
			require.True(t, errors.As(err, &d))
			assert.Equal(t, tc.want[0], d.Error())
		})
	}
}

func TestLegacyFieldKeysAreWarnings(t *testing.T) {
	p, diags, err := loadMap(t, map[string]string{"main.thrift": "struct A {\n  0: i32 x,\n  i32 y,\n  -5: i32 z\n}\n"})
	require.NoError(t, err)
	want := []string{
		"main.thrift:2:3: Nonpositive value (0) not allowed as a field key.",
		"main.thrift:3:7: No field key specified for y, resulting protocol may have conflicts or not be backwards compatible!",
		"main.thrift:4:3: Nonpositive value (-5) not allowed as a field key.",
	}
	got := make([]string, len(diags.Warnings))
	for i, w := range diags.Warnings {
		got[i] = w.Error()
		assert.ErrorIs(t, w, ErrLegacyFieldKey)
	}
	assert.Equal(t, want, got)
	require.Len(t, p.Structs[0].Fields, 3)
	for i, id := range []int{-1, -2, -3} {
		f := p.Structs[0].Fields[i]
		assert.Equal(t, id, f.ID, f.Name)
		assert.False(t, f.ExplicitID, f.Name)
	}
	assert.Empty(t, diags.Error())
}

func TestLoadMissingRootFile(t *testing.T) {
	p, diags, err := Load("testdata/does-not-exist.thrift", nil)
	require.Error(t, err)
	assert.Nil(t, p)
	assert.ErrorIs(t, err, ErrIO)
	assert.Equal(t, "testdata/does-not-exist.thrift:1:1: cannot read file: no such file", diags.Error())
}

// TestKeywordFieldNames: Apache's compiler since THRIFT-5626 takes any
// keyword that cannot follow a field name as one (its FieldName rule);
// names elsewhere stay identifiers.
func TestKeywordFieldNames(t *testing.T) {
	src := "struct Thrift5626 {\n" +
		"   1: i8 i8\n   2: i16 i16\n   3: i32 i32\n   4: i64 i64\n   5: uuid uuid\n   6: string string\n" +
		"   7: binary binary\n   8: bool bool\n   9: byte byte\n  10: list<string> list\n  11: set<string> set\n" +
		"  12: map<string,string> map\n  13: double double\n  14: optional i32 optional\n  15: required i32 required\n" +
		"  16: i32 void\n  17: i32 oneway\n  18: i32 async\n  19: i32 typedef\n  20: i32 struct\n  21: i32 union\n" +
		"  22: i32 exception\n  23: i32 extends\n  24: i32 throws\n  25: i32 service\n  26: i32 enum\n  27: i32 const\n" +
		"  28: i32 namespace\n  29: i32 include\n  30: i32 cpp_include\n}\n" +
		"service S {\n  i32 f(1: i32 i32, 2: string string) throws (1: E exception)\n}\n" +
		"exception E {\n  1: string string\n}\n"
	p, diags, err := loadMap(t, map[string]string{"main.thrift": src})
	require.NoError(t, err, "%v", diags)
	assert.Empty(t, diags.Warnings)
	var names []string
	for _, f := range p.Structs[0].Fields {
		names = append(names, f.Name)
	}
	assert.Equal(t, []string{"i8", "i16", "i32", "i64", "uuid", "string", "binary", "bool", "byte", "list", "set", "map",
		"double", "optional", "required", "void", "oneway", "async", "typedef", "struct", "union", "exception",
		"extends", "throws", "service", "enum", "const", "namespace", "include", "cpp_include"}, names)
	assert.Equal(t, KindI8, p.Structs[0].Fields[0].Type.Kind)
	assert.Equal(t, KindMap, p.Structs[0].Fields[11].Type.Kind)
	assert.Equal(t, "i32", p.Services[0].Functions[0].Args[0].Name)
	assert.Equal(t, "exception", p.Services[0].Functions[0].Throws[0].Name)

	for _, tc := range []struct{ name, src, want string }{
		// Keywords that may follow a field name are not names (Apache's rule too).
		{"xsd keyword", "struct A {\n  1: i32 xsd_optional\n}\n", `main.thrift:2:10: unexpected "xsd_optional" (expected identifier)`},
		{"keyword as struct name", "struct i8 {\n  1: i32 a\n}\n", `main.thrift:1:8: unexpected "i8" (expected identifier)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags, err := loadMap(t, map[string]string{"main.thrift": tc.src})
			require.Error(t, err)
			assert.Equal(t, tc.want, diags.Error())
		})
	}
}

// TestEnumDefaultWithAnotherEnumsPrefix: `MyEnum2 x = MyEnum1.ME2_2` names
// ME2_2 with the wrong enum's prefix; Apache's compiler looks the last part
// up in the field's enum, so hatgen reads it as MyEnum2.ME2_2 and warns.
func TestEnumDefaultWithAnotherEnumsPrefix(t *testing.T) {
	src := "enum MyEnum1 {\n  ME1_0 = 0,\n  ME1_1 = 1,\n}\n" +
		"enum MyEnum2 {\n  ME2_0 = 0,\n  ME2_1 = 1,\n  ME2_2 = 2,\n}\n" +
		"struct S {\n  1: MyEnum2 x = MyEnum1.ME2_2\n  2: MyEnum2 y = MyEnum2.ME2_1\n  3: MyEnum1 z = MyEnum1.ME1_1\n}\n" +
		"const MyEnum2 C = MyEnum1.ME2_0\n"
	p, diags, err := loadMap(t, map[string]string{"main.thrift": src})
	require.NoError(t, err, "%v", diags)
	var got []string
	for _, w := range diags.Warnings {
		got = append(got, w.Error())
	}
	assert.Equal(t, []string{
		`main.thrift:11:18: MyEnum1.ME2_2: ME2_2 is a value of MyEnum2, not of MyEnum1; read as MyEnum2.ME2_2, as Apache's compiler does`,
		`main.thrift:15:19: MyEnum1.ME2_0: ME2_0 is a value of MyEnum2, not of MyEnum1; read as MyEnum2.ME2_0, as Apache's compiler does`,
	}, got)
	x := p.Structs[0].Fields[0].Default.EnumValue
	require.NotNil(t, x)
	assert.Equal(t, "MyEnum2", x.Enum.Name)
	assert.Equal(t, "ME2_2", x.Name)
	assert.Equal(t, int64(2), x.Value)
	assert.Equal(t, "ME2_0", p.Consts[0].Value.EnumValue.Name)

	// A name the field's enum does not have is still an error.
	_, diags, err = loadMap(t, map[string]string{"main.thrift": strings.Replace(src, "MyEnum1.ME2_2", "MyEnum1.ME2_9", 1)})
	require.Error(t, err)
	assert.Equal(t, `main.thrift:11:18: unknown enum value "ME2_9" in enum MyEnum1`, diags.Error())
}
