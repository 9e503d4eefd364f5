package idl

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sharedIDL is the real-world IDL corpus beside the repository.
func sharedIDL(t testing.TB) string { return testenv.SharedIDLDir(t) }

func findFunc(t *testing.T, s *Service, name string) *Function {
	t.Helper()
	for _, f := range s.AllFunctions() {
		if f.Name == name {
			return f
		}
	}
	require.Failf(t, "no such function", "%s.%s", s.Name, name)
	return nil
}

func findStruct(t *testing.T, p *Program, name string) *Struct {
	t.Helper()
	for _, s := range p.Structs {
		if s.Name == name {
			return s
		}
	}
	require.Failf(t, "no such struct", name)
	return nil
}

func findConst(t *testing.T, p *Program, name string) *Const {
	t.Helper()
	for _, c := range p.Consts {
		if c.Name == name {
			return c
		}
	}
	require.Failf(t, "no such const", name)
	return nil
}

func findService(t *testing.T, p *Program, name string) *Service {
	t.Helper()
	for _, s := range p.Services {
		if s.Name == name {
			return s
		}
	}
	require.Failf(t, "no such service", name)
	return nil
}

// TestSharedIDLFilesLoad loads every real-world IDL file without errors.
func TestSharedIDLFilesLoad(t *testing.T) {
	var files []string
	err := filepath.WalkDir(sharedIDL(t), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".thrift") {
			files = append(files, p)
		}
		return err
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 8)
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, sharedIDL(t)+"/"), func(t *testing.T) {
			p, diags, err := Load(f, nil)
			require.NoError(t, err)
			require.Empty(t, diags.Errors)
			require.NotNil(t, p)
			assertFullyResolved(t, p)
		})
	}
}

// assertFullyResolved walks every type reference of p and its includes and
// checks the resolution fields the code generator relies on.
func assertFullyResolved(t *testing.T, p *Program) {
	t.Helper()
	var check func(ty *Type)
	check = func(ty *Type) {
		require.NotNil(t, ty)
		switch ty.Kind {
		case KindStruct:
			require.NotNil(t, ty.Struct, ty.Name)
		case KindEnum:
			require.NotNil(t, ty.Enum, ty.Name)
		case KindTypedef:
			require.NotNil(t, ty.Typedef, ty.Name)
			require.NotEqual(t, KindTypedef, ty.TrueType().Kind, ty.Name)
		case KindList, KindSet:
			check(ty.Elem)
		case KindMap:
			check(ty.Key)
			check(ty.Elem)
		}
	}
	seen := map[*Program]bool{}
	var walk func(p *Program)
	walk = func(p *Program) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, inc := range p.Includes {
			require.NotNil(t, inc.Program, inc.Path)
			walk(inc.Program)
		}
		for _, td := range p.Typedefs {
			check(td.Type)
		}
		for _, c := range p.Consts {
			check(c.Type)
		}
		for _, s := range p.Structs {
			for _, f := range s.Fields {
				check(f.Type)
			}
		}
		for _, s := range p.Services {
			for _, f := range s.Functions {
				if f.Returns != nil {
					check(f.Returns)
				}
				for _, a := range append(append([]*Field(nil), f.Args...), f.Throws...) {
					check(a.Type)
				}
			}
		}
	}
	walk(p)
}

func TestThriftTestModel(t *testing.T) {
	p, diags, err := Load(filepath.Join(sharedIDL(t), "apache/thrift/test/ThriftTest.thrift"), nil)
	require.NoError(t, err)
	assert.Empty(t, diags.Warnings)
	assert.Equal(t, "ThriftTest", p.Name)
	assert.Equal(t, "thrifttest", p.Namespaces["go"])
	assert.Equal(t, "thrift.test", p.Namespaces["*"])
	assert.Equal(t, "ThriftTest", p.Namespaces["py.twisted"])

	require.Len(t, p.Enums, 1)
	numberz := p.Enums[0]
	assert.Equal(t, "Docstring!", numberz.Doc)
	var values []int64
	for _, v := range numberz.Values {
		values = append(values, v.Value)
		assert.Same(t, numberz, v.Enum)
	}
	assert.Equal(t, []int64{1, 2, 3, 5, 6, 8}, values)

	my := findConst(t, p, "myNumberz")
	assert.Equal(t, ConstIdent, my.Value.Kind)
	require.NotNil(t, my.Value.EnumValue)
	assert.Equal(t, "ONE", my.Value.EnumValue.Name)
	assert.Equal(t, KindEnum, my.Type.Kind)

	crazy := findStruct(t, p, "CrazyNesting")
	lf := crazy.Fields[2]
	assert.Equal(t, Required, lf.Req)
	assert.Equal(t, KindList, lf.Type.Kind)
	assert.Equal(t, KindMap, lf.Type.Elem.Kind)
	assert.Equal(t, KindSet, lf.Type.Elem.Key.Kind)
	assert.Equal(t, []Annotation{{Key: "python.immutable", Value: "", Pos: lf.Type.Elem.Key.Annotations[0].Pos}}, lf.Type.Elem.Key.Annotations)
	assert.Equal(t, KindUUID, crazy.Fields[4].Type.Kind)

	insanity := findStruct(t, p, "Insanity")
	require.Len(t, insanity.Annotations, 1)
	assert.Equal(t, "python.immutable", insanity.Annotations[0].Key)
	userMap := insanity.Fields[0].Type
	assert.Equal(t, KindTypedef, userMap.Elem.Kind)
	assert.Equal(t, KindI64, userMap.Elem.TrueType().Kind)

	assert.Equal(t, StructKindUnion, findStruct(t, p, "SomeUnion").Kind)
	assert.Equal(t, StructKindException, findStruct(t, p, "Xception").Kind)

	bt := findStruct(t, p, "BoolTest")
	assert.Equal(t, &ConstValue{Kind: ConstInt, Int: 1, Pos: bt.Fields[0].Default.Pos}, bt.Fields[0].Default)
	ob := findStruct(t, p, "OptionalBinary")
	assert.Equal(t, ConstList, ob.Fields[0].Default.Kind, "{} for a set becomes an empty list")
	assert.Equal(t, ConstMap, ob.Fields[1].Default.Kind)

	svc := findService(t, p, "ThriftTest")
	void := findFunc(t, svc, "testVoid")
	assert.Nil(t, void.Returns)
	assert.Equal(t, "Prints \"testVoid()\" and returns nothing.", void.Doc)
	oneway := findFunc(t, svc, "testOneway")
	assert.True(t, oneway.Oneway)
	multi := findFunc(t, svc, "testMultiException")
	require.Len(t, multi.Throws, 2)
	assert.Equal(t, "Xception2", multi.Throws[1].Type.Struct.Name)
	assert.Same(t, svc, multi.Service)
	assert.Equal(t, 23, len(svc.Functions))
}

func TestIncludeRelativeToIncludingFile(t *testing.T) {
	p, diags, err := Load(filepath.Join(sharedIDL(t), "apache/thrift/test/Include.thrift"), nil)
	require.NoError(t, err)
	assert.Empty(t, diags.Errors)
	require.Len(t, p.Includes, 1)
	inc := p.Includes[0]
	assert.Equal(t, "v0.16/ThriftTest.thrift", inc.Path)
	require.NotNil(t, inc.Program)
	assert.Equal(t, "ThriftTest", inc.Program.Name)
	assert.Equal(t, filepath.Join(sharedIDL(t), "apache/thrift/test/v0.16/ThriftTest.thrift"), inc.Program.Path)
	f := findStruct(t, p, "IncludeTest").Fields[0]
	assert.Equal(t, "ThriftTest.Bools", f.Type.Name)
	assert.Equal(t, KindStruct, f.Type.Kind)
	assert.Same(t, inc.Program, f.Type.Struct.Program)
}

func TestTutorialExtendsAcrossInclude(t *testing.T) {
	p, _, err := Load(filepath.Join(sharedIDL(t), "apache/thrift/tutorial/tutorial.thrift"), nil)
	require.NoError(t, err)
	calc := findService(t, p, "Calculator")
	require.NotNil(t, calc.Extends)
	assert.Equal(t, "shared.SharedService", calc.ExtendsName)
	assert.Equal(t, "SharedService", calc.Extends.Name)
	all := calc.AllFunctions()
	require.Len(t, all, 5)
	assert.Equal(t, "getStruct", all[0].Name)
	assert.Equal(t, []string{"ping", "add", "calculate", "zip"}, []string{all[1].Name, all[2].Name, all[3].Name, all[4].Name})
	m := findConst(t, p, "MAPCONSTANT")
	require.Len(t, m.Value.Map, 2)
	assert.Equal(t, "hello", m.Value.Map[0].Key.String)
	assert.Equal(t, "moon", m.Value.Map[1].Value.String)
}

func loadConstructs(t *testing.T) *Program {
	t.Helper()
	p, diags, err := Load("testdata/constructs/main.thrift", []string{"testdata/constructs/incdir"})
	require.NoError(t, err)
	require.Empty(t, diags.Errors)
	assertFullyResolved(t, p)
	return p
}

func TestConstructsHeaders(t *testing.T) {
	p := loadConstructs(t)
	assert.Equal(t, "testdata/constructs/main.thrift", p.Path)
	assert.Equal(t, "main", p.Name)
	assert.Equal(t, map[string]string{"go": "hat.example", "py.twisted": "example.twisted", "*": "example", "xsd": "test"}, p.Namespaces)
	assert.Equal(t, []string{"<unordered_map>"}, p.CppIncludes)
	require.Len(t, p.Includes, 3)
	left, right, extra := p.Includes[0].Program, p.Includes[1].Program, p.Includes[2].Program
	assert.Equal(t, "testdata/constructs/sub/left.thrift", left.Path)
	assert.Equal(t, "testdata/constructs/incdir/extra.thrift", extra.Path)
	// common.thrift is included by both left and right but parsed once.
	assert.Same(t, left.Includes[0].Program, right.Includes[0].Program)
	assert.Equal(t, Pos{File: "testdata/constructs/main.thrift", Line: 3, Col: 9}, p.Includes[0].Pos)
}

func TestConstructsConstants(t *testing.T) {
	p := loadConstructs(t)
	tests := []struct {
		name  string
		check func(t *testing.T, c *Const)
	}{
		{"INT_CONST", func(t *testing.T, c *Const) { assert.Equal(t, int64(42), c.Value.Int) }},
		{"HEX_CONST", func(t *testing.T, c *Const) { assert.Equal(t, int64(0x7FFF), c.Value.Int) }},
		{"NEG_HEX", func(t *testing.T, c *Const) { assert.Equal(t, int64(-16), c.Value.Int) }},
		{"PI", func(t *testing.T, c *Const) { assert.InDelta(t, 3.14159, c.Value.Double, 1e-12) }},
		{"EXP", func(t *testing.T, c *Const) { assert.Equal(t, 1e10, c.Value.Double) }},
		{"FROM_INT", func(t *testing.T, c *Const) { assert.Equal(t, ConstInt, c.Value.Kind) }},
		{"GREETING", func(t *testing.T, c *Const) { assert.Equal(t, "hello \"world\"\n", c.Value.String) }},
		{"SINGLE", func(t *testing.T, c *Const) { assert.Equal(t, "it's", c.Value.String) }},
		{"YES", func(t *testing.T, c *Const) { assert.Equal(t, int64(1), c.Value.Int) }},
		{"SMALL", func(t *testing.T, c *Const) {
			assert.Equal(t, KindI8, c.Type.Kind)
			assert.Equal(t, int64(-128), c.Value.Int)
		}},
		{"NAMES", func(t *testing.T, c *Const) {
			require.Len(t, c.Value.List, 3)
			assert.Equal(t, "c", c.Value.List[2].String)
		}},
		{"AGES", func(t *testing.T, c *Const) {
			require.Len(t, c.Value.Map, 2)
			assert.Equal(t, "bob", c.Value.Map[1].Key.String)
			assert.Equal(t, int64(42), c.Value.Map[1].Value.Int)
		}},
		{"BY_COLOR", func(t *testing.T, c *Const) {
			require.Len(t, c.Value.Map, 2)
			assert.Equal(t, "GREEN", c.Value.Map[1].Key.EnumValue.Name)
			assert.Equal(t, ConstList, c.Value.Map[1].Value.Kind)
		}},
		{"FAVORITE", func(t *testing.T, c *Const) { assert.Equal(t, int64(6), c.Value.EnumValue.Value) }},
		{"BARE", func(t *testing.T, c *Const) { assert.Equal(t, "GREEN", c.Value.EnumValue.Name) }},
		{"ALIAS", func(t *testing.T, c *Const) { assert.Equal(t, "INT_CONST", c.Value.Const.Name) }},
		{"FROM_ENUM", func(t *testing.T, c *Const) { assert.Equal(t, "BLUE", c.Value.EnumValue.Name) }},
		{"ACCOUNT", func(t *testing.T, c *Const) {
			assert.Equal(t, KindTypedef, c.Type.Kind)
			assert.Equal(t, KindI64, c.Type.TrueType().Kind)
		}},
		{"ID", func(t *testing.T, c *Const) { assert.Equal(t, KindUUID, c.Type.Kind) }},
		{"ORIGIN", func(t *testing.T, c *Const) {
			assert.Equal(t, "Point", c.Type.Struct.Name)
			assert.Len(t, c.Value.Map, 3)
		}},
		{"WITH_ANNOTATION", func(t *testing.T, c *Const) {
			assert.Equal(t, []Annotation{{Key: "deprecated", Value: "yes", Pos: c.Annotations[0].Pos}}, c.Annotations)
		}},
		{"SHARED", func(t *testing.T, c *Const) {
			assert.Equal(t, "LIMIT", c.Value.Map[0].Value.Const.Name)
			assert.Equal(t, "left", c.Value.Map[0].Value.Const.Program.Name)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, findConst(t, p, tc.name)) })
	}
}

func TestConstructsTypes(t *testing.T) {
	p := loadConstructs(t)
	require.Len(t, p.Enums, 3)
	color := p.Enums[0]
	var got []string
	for _, v := range color.Values {
		got = append(got, v.Name+"="+strconv.FormatInt(v.Value, 10))
	}
	assert.Equal(t, []string{"RED=0", "GREEN=5", "BLUE=6", "BLACK=-1", "WHITE=0"}, got)
	assert.Equal(t, "The green one.", color.Values[1].Doc)
	assert.Equal(t, "Colour", color.Annotations[0].Value)
	assert.Empty(t, p.Enums[1].Values)
	assert.True(t, p.Enums[2].Senum)
	assert.Equal(t, []string{"mercury", "venus", "earth"}, p.Enums[2].SenumValues)

	require.Len(t, p.Typedefs, 3)
	assert.Equal(t, "Identifier of a user.", p.Typedefs[0].Doc)
	assert.Equal(t, "UserID", p.Typedefs[0].Annotations[0].Value)
	assert.Equal(t, KindStruct, p.Typedefs[2].Type.Elem.Kind, "forward reference resolved")

	pt := findStruct(t, p, "Point")
	require.Len(t, pt.Fields, 10)
	assert.Equal(t, Required, pt.Fields[0].Req)
	assert.Equal(t, Optional, pt.Fields[2].Req)
	assert.Equal(t, "Optional label.", pt.Fields[2].Doc)
	assert.Equal(t, `json:"label"`, pt.Fields[2].Annotations[0].Value)
	assert.Equal(t, KindString, pt.Fields[3].Type.Kind, "slist is a string")
	assert.Equal(t, KindI8, pt.Fields[4].Type.Kind)
	assert.Equal(t, KindBinary, pt.Fields[6].Type.Kind)
	assert.Equal(t, "Later", pt.Fields[7].Type.Struct.Name)
	nested := pt.Fields[8].Type
	assert.Equal(t, "map<string,set<list<i16>>>", nested.Name)
	assert.Equal(t, "std::map", nested.Annotations[0].Value)
	assert.Equal(t, "1", nested.Key.Annotations[0].Value)
	assert.Equal(t, KindI16, nested.Elem.Elem.Elem.Kind)
	assert.Equal(t, Pos{File: "testdata/constructs/main.thrift", Line: 57, Col: 3}, pt.Fields[0].Pos)

	later := findStruct(t, p, "Later")
	assert.Equal(t, "earth", later.Fields[1].Default.String)
	assert.Equal(t, "Extra", later.Fields[4].Type.Struct.Name)
	assert.Equal(t, "ACCOUNT", later.Fields[5].Default.Const.Name)
}

func TestConstructsServicesAndHints(t *testing.T) {
	p := loadConstructs(t)
	calc := findService(t, p, "Calc")
	assert.Equal(t, "Service documentation.", calc.Doc)
	require.Len(t, calc.Hints, 3)
	assert.Equal(t, HintShared, calc.Hints[0].Side)
	assert.Equal(t, HintServer, calc.Hints[1].Side)
	assert.Equal(t, HintClient, calc.Hints[2].Side)
	file := "testdata/constructs/main.thrift"
	assert.Equal(t, []*HintEntry{
		{Key: "perf_goal", Value: "latency", Kind: HintIdent, Pos: Pos{file, 98, 9}, ValuePos: Pos{file, 98, 21}},
		{Key: "concurrency", Value: "1", Kind: HintNumber, Pos: Pos{file, 98, 30}, ValuePos: Pos{file, 98, 44}},
	}, calc.Hints[0].Entries)
	assert.Equal(t, Pos{file, 98, 3}, calc.Hints[0].Pos)
	assert.Equal(t, []*HintEntry{
		{Key: "payload", Value: "4KiB", Kind: HintSize, Pos: Pos{file, 99, 11}, ValuePos: Pos{file, 99, 21}},
		{Key: "kv.sync", Value: "on", Kind: HintString, Pos: Pos{file, 99, 27}, ValuePos: Pos{file, 99, 37}},
	}, calc.Hints[1].Entries)

	add := findFunc(t, calc, "add")
	assert.Equal(t, "Adds.", add.Doc)
	require.Len(t, add.Hints, 2)
	assert.Equal(t, "512", add.Hints[0].Entries[0].Value)
	assert.Equal(t, HintNumber, add.Hints[1].Entries[0].Kind)
	assert.Equal(t, "1.5", add.Hints[1].Entries[0].Value)

	move := findFunc(t, calc, "move")
	require.Len(t, move.Throws, 2)
	assert.Equal(t, "left.Failed", move.Throws[1].Type.Name)
	assert.Equal(t, "1MB", move.Hints[0].Entries[0].Value)
	assert.Equal(t, HintServer, move.Hints[0].Side)

	assert.True(t, findFunc(t, calc, "fire").Oneway)
	assert.True(t, findFunc(t, calc, "legacy_async").Oneway)
	color := findFunc(t, calc, "color")
	assert.Equal(t, "deprecated", color.Annotations[0].Key)
	assert.Equal(t, "throughput", color.Hints[0].Entries[0].Value)
	assert.Empty(t, findFunc(t, calc, "none").Hints)

	derived := findService(t, p, "Derived")
	names := []string{}
	for _, f := range derived.AllFunctions() {
		names = append(names, f.Name)
	}
	assert.Equal(t, []string{"ping", "add", "move", "fire", "legacy_async", "color", "none", "account"}, names)
	assert.Same(t, calc, derived.Extends)
	remote := findService(t, p, "Remote")
	assert.Equal(t, "LeftService", remote.Extends.Name)
	assert.Equal(t, "common.Common", remote.AllFunctions()[0].Returns.Name)
}

func TestParseStringAndLoadFSAgree(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(sharedIDL(t), "apache/thrift/tutorial/shared.thrift"))
	require.NoError(t, err)
	a, _, err := ParseString("shared.thrift", string(src))
	require.NoError(t, err)
	b, _, err := LoadFS(os.DirFS(filepath.Join(sharedIDL(t), "apache/thrift/tutorial")), "shared.thrift", nil)
	require.NoError(t, err)
	assert.Equal(t, a.Namespaces, b.Namespaces)
	assert.Equal(t, len(a.Structs), len(b.Structs))
	assert.Equal(t, a.Services[0].Functions[0].Pos, b.Services[0].Functions[0].Pos)
}

// The hint words are not reserved: plain Thrift may use them as names.
func TestHintWordsAsOrdinaryNames(t *testing.T) {
	src := "enum hint { hint, s_hint = 3, c_hint }\n" +
		"struct c_hint { 1: hint hint, 2: i32 s_hint }\n" +
		"typedef c_hint s_hint\n" +
		"service S {\n  hint: a = b;\n  hint hint(1: s_hint c_hint) [c_hint: x = y]\n  void s_hint()\n}\n"
	p, diags, err := loadMap(t, map[string]string{"main.thrift": src})
	require.NoError(t, err, diags.Error())
	assert.Equal(t, int64(4), p.Enums[0].Values[2].Value)
	f := p.Structs[0].Fields[0]
	assert.Equal(t, "hint", f.Name)
	assert.Equal(t, KindEnum, f.Type.Kind)
	svc := p.Services[0]
	require.Len(t, svc.Hints, 1)
	require.Len(t, svc.Functions, 2)
	fn := svc.Functions[0]
	assert.Equal(t, "hint", fn.Name)
	assert.Equal(t, "hint", fn.Returns.Enum.Name)
	assert.Equal(t, KindTypedef, fn.Args[0].Type.Kind)
	assert.Equal(t, HintClient, fn.Hints[0].Side)
}

func TestDiagnosticsAPI(t *testing.T) {
	_, diags, err := loadMap(t, map[string]string{"main.thrift": "struct A { 1: X a, 2: Y b }\n"})
	require.Error(t, err)
	assert.True(t, diags.HasErrors())
	assert.Equal(t, "main.thrift:1:15: unknown type \"X\"\nmain.thrift:1:23: unknown type \"Y\"", err.Error())
	var d *Diagnostic
	require.ErrorAs(t, err, &d)
	assert.Equal(t, Pos{File: "main.thrift", Line: 1, Col: 15}, d.Pos)
	assert.ErrorIs(t, err, ErrUnknown)
	assert.NotErrorIs(t, err, ErrSyntax)
	var none *Diagnostics
	assert.False(t, none.HasErrors())
}

func TestIncludeSearchOrder(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"relative to the including file first", map[string]string{
			"main.thrift": "include \"x.thrift\"\n", "x.thrift": "struct Here {}\n", "inc/x.thrift": "struct There {}\n"}, "Here"},
		{"then the -I directories", map[string]string{
			"main.thrift": "include \"x.thrift\"\n", "inc/x.thrift": "struct There {}\n"}, "There"},
		{"nested includes are relative to their own file", map[string]string{
			"main.thrift": "include \"sub/a.thrift\"\n", "sub/a.thrift": "include \"x.thrift\"\n",
			"sub/x.thrift": "struct Sub {}\n", "x.thrift": "struct Top {}\n"}, "Sub"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := loadMap(t, tc.files)
			require.NoError(t, err)
			inc := p.Includes[0].Program
			for len(inc.Structs) == 0 {
				require.NotEmpty(t, inc.Includes)
				inc = inc.Includes[0].Program
			}
			assert.Equal(t, tc.want, inc.Structs[0].Name)
		})
	}
}

// Load is safe for concurrent use: the shared participle parser is
// immutable once built.
func TestConcurrentLoads(t *testing.T) {
	path := filepath.Join(sharedIDL(t), "apache/thrift/test/ThriftTest.thrift")
	errs := make(chan error, 4)
	for i := 0; i < cap(errs); i++ {
		go func() {
			_, _, err := Load(path, nil)
			errs <- err
		}()
	}
	timeout := time.After(30 * time.Second)
	for i := 0; i < cap(errs); i++ {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-timeout:
			t.Fatal("concurrent loads did not finish")
		}
	}
}
