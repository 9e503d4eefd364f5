package codegen

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hatrpc/hatrpc/pkg/idl"
)

// Expected names are those Apache Thrift's Go generator (t_go_generator.cc)
// produces for the same IDL identifiers.
func TestPublicize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"echo", "Echo"},
		{"tx_name", "TxName"},
		{"user_id", "UserID"},
		{"id", "ID"},
		{"i32_thing", "I32Thing"},
		{"http_url", "HTTPURL"},
		{"a_b_c", "ABC"},
		{"MAX_USERS", "MAX_USERS"},
		{"NewThing", "NewThing_"},
		{"newstruct", "Newstruct_"},
		{"foo_args", "FooArgs_"},
		{"BarResult", "BarResult_"},
		{"type", "Type"},
		{"secondtestString", "SecondtestString"},
		{"_under", "X_under"},
		{"x_1", "X_1"},
		{"shared.SharedStruct", "shared.SharedStruct"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, publicize(tc.in), tc.in)
	}
}

func TestHelperNames(t *testing.T) {
	tests := []struct{ svc, fn, args, result string }{
		{"ThriftTest", "testVoid", "ThriftTestTestVoidArgs", "ThriftTestTestVoidResult"},
		{"Calculator", "add", "CalculatorAddArgs", "CalculatorAddResult"},
		{"range", "new_thing", "RangeNewThingArgs_", "RangeNewThingResult_"},
		{"KV", "get_id", "KVGetIDArgs", "KVGetIDResult"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.args, argsName(tc.svc, tc.fn))
		assert.Equal(t, tc.result, resultName(tc.svc, tc.fn))
	}
}

func TestVarName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"thing", "thing"},
		{"type", "type_a1"},
		{"Func", "func_a1"},
		{"error", "error_a1"},
		{"ctx", "ctx_a1"},
		{"_c", "_c_a1"},
		{"_call", "_call_a1"},
		{"secondsToSleep", "secondsToSleep"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, varName(tc.in), tc.in)
	}
}

// Fields whose names publicize alike keep distinct Go names: the first
// its own, later ones `_`s until no other field has the name (Apache's
// Go generator writes the same name twice, code that does not compile).
func TestFieldGoNames(t *testing.T) {
	fields := func(names ...string) []*idl.Field {
		var out []*idl.Field
		for _, n := range names {
			out = append(out, &idl.Field{Name: n})
		}
		return out
	}
	tests := []struct {
		kind idl.StructKind
		in   []string
		want []string
	}{
		{idl.StructKindStruct, []string{"a", "b_c"}, []string{"A", "BC"}},
		{idl.StructKindStruct, []string{"a_b", "aB"}, []string{"AB", "AB_"}},
		{idl.StructKindStruct, []string{"aB", "a_b", "AB_"}, []string{"AB", "AB__", "AB_"}},
		{idl.StructKindStruct, []string{"string", "String_"}, []string{"String_", "String__"}},
		{idl.StructKindException, []string{"error", "Error_"}, []string{"Error_", "Error__"}},
		{idl.StructKindStruct, []string{"theEdgeCase", "theEdgeCase_", "theEdgeCase__", "TheEdgeCase", "TheEdgeCase_", "TheEdgeCase__"},
			[]string{"TheEdgeCase", "TheEdgeCase_", "TheEdgeCase__", "TheEdgeCase___", "TheEdgeCase____", "TheEdgeCase_____"}},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, fieldGoNames(tc.kind, fields(tc.in...)), "%v", tc.in)
	}
}

func TestStreamVarName(t *testing.T) {
	for in, want := range map[string]string{"req": "req", "stream": "stream_a1", "io": "io_a1", "_s": "_s_a1", "ctx": "ctx_a1", "type": "type_a1"} {
		assert.Equal(t, want, streamVarName(in), in)
	}
}
