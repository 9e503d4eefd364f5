package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestListDescribe: list and describe render the IDL, included files'
// declarations by their prefix.
func TestListDescribe(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"list", kindsIDL}, `Kinds
  Kinds.version
  Kinds.echo
  Kinds.put
shared.Base
  shared.Base.version
types:
  struct Point
  union Choice
  struct Node
  struct Item
  struct Everything
  enum Level
  typedef Millis
  struct shared.Tag
  exception shared.Oops
`},
		{[]string{"describe", kindsIDL, "Kinds"}, `service Kinds extends shared.Base {
  string version()
  Everything echo(1: Everything v)
  void put(1: Item item, 2: i8 small) throws (1: shared.Oops oops)
}
`},
		{[]string{"describe", kindsIDL, "Kinds.put"}, "void put(1: Item item, 2: i8 small) throws (1: shared.Oops oops)\n"},
		{[]string{"describe", kindsIDL, "Item"}, "struct Item {\n  1: required string name\n  2: optional i16 count\n}\n"},
		{[]string{"describe", kindsIDL, "Level"}, "enum Level {\n  LOW = 1\n  HIGH = 10\n}\n"},
		{[]string{"describe", kindsIDL, "Millis"}, "typedef i64 Millis\n"},
		{[]string{"describe", kindsIDL, "shared.Oops"}, "exception Oops {\n  1: string why\n  2: i32 code\n}\n"},
		{[]string{"describe", hatkvIDL, "HatKV.Get"}, "// Returns the record, restricted to fields when fields is not empty.\n" +
			"Record Get(1: string key, 2: list<string> fields) throws (1: InvalidArgument bad, 2: NotFound missing)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.args[0]+" "+tt.args[len(tt.args)-1], func(t *testing.T) {
			code, out, errOut := hatrpc(t, tt.args...)
			assert.Equal(t, 0, code, errOut)
			assert.Equal(t, tt.want, out)
		})
	}
	code, _, errOut := hatrpc(t, "describe", kindsIDL, "Nope")
	assert.Equal(t, 1, code)
	assert.Equal(t, "hatrpc: \"Nope\" is no service, function or type of "+kindsIDL+"\n", errOut)
	code, _, errOut = hatrpc(t, "describe", kindsIDL, "Kinds.nope")
	assert.Equal(t, 1, code)
	assert.Equal(t, "hatrpc: no function \"Kinds.nope\" (have version, echo, put)\n", errOut)
}
