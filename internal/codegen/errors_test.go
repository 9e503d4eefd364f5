package codegen_test

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/codegen"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/idl"
)

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
		kind            error
	}{
		{"service helper collides with a type", "struct KVClient { 1: i32 a }\nservice KV {\n  void f()\n}\n",
			"t.thrift:2:9: Go name KVClient collides with the declaration at t.thrift:1:8", codegen.ErrGenerate},
		{"package main", "namespace go x.main\nstruct S { 1: i32 a }\n",
			"t.thrift:1:1: go namespace x.main yields package main", codegen.ErrGenerate},
		{"MapEntry is reserved", "struct MapEntry { 1: i32 a }\n",
			"t.thrift:1:8: MapEntry is reserved by hatgen", codegen.ErrGenerate},
		{"stream interface collides with a type", "struct R { 1: i32 a }\nstruct STailServer { 1: i32 a }\nservice S {\n  R tail(1: R r) (streaming.mode=\"server\")\n}\n",
			"t.thrift:4:5: Go name STailServer collides with the declaration at t.thrift:2:8", codegen.ErrGenerate},
		{"bad hint", "service S {\n  hint: perf_goal=fast;\n  void f()\n}\n",
			`t.thrift:2:19: bad value "fast" for perf_goal`, hints.ErrBadValue},
		{"idempotent on the server side", "service S {\n  string get() [s_hint: idempotent = true;]\n}\n",
			`t.thrift:2:25: hint "idempotent" is not allowed in s_hint: it is client-side only`, hints.ErrSide},
		{"too many retries", "service S {\n  c_hint: idempotent = on, retries = 50;\n  void f()\n}\n",
			`t.thrift:2:38: bad value "50" for retries: must be at most 10`, hints.ErrRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prog, _, err := idl.ParseString("t.thrift", tc.src)
			require.NoError(t, err)
			_, err = codegen.Generate(prog)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, errors.Is(err, tc.kind), "%v", err)
			cerr := codegen.Check(prog)
			require.Error(t, cerr)
			assert.Contains(t, cerr.Error(), tc.want)
		})
	}
}

func TestCheckReportsAllServices(t *testing.T) {
	src := "service A {\n  hint: perf_goal=fast;\n  void f()\n}\nservice B {\n  hint: polling=never;\n  void g()\n}\n"
	prog, _, err := idl.ParseString("t.thrift", src)
	require.NoError(t, err)
	err = codegen.Check(prog)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "t.thrift:2:")
	assert.Contains(t, err.Error(), "t.thrift:6:")
}

func TestGenerateRejectsClashingFiles(t *testing.T) {
	fsys := fstest.MapFS{
		"m.thrift":   {Data: []byte("include \"a/x.thrift\"\ninclude \"b/x.thrift\"\nstruct M { 1: i32 m }\n")},
		"a/x.thrift": {Data: []byte("namespace go same\nstruct A { 1: i32 a }\n")},
		"b/x.thrift": {Data: []byte("namespace go same\nstruct B { 1: i32 b }\n")},
	}
	prog, _, err := idl.LoadFS(fsys, "m.thrift", nil)
	require.NoError(t, err)
	_, err = codegen.Generate(prog)
	require.ErrorIs(t, err, codegen.ErrGenerate)
	assert.Equal(t, "b/x.thrift:1:1: generates same/x.go, as a/x.thrift does: give one of them another go namespace", err.Error())
}
