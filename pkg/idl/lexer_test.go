package idl

import (
	"testing"

	"github.com/alecthomas/participle/v2/lexer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type tok struct {
	typ       lexer.TokenType
	val       string
	line, col int
}

func TestLexTokens(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []tok
	}{
		{"shebang and comments", "#!/usr/bin/thrift\n// c\n# d\n/* e */ struct", []tok{{tokKeyword, "struct", 4, 9}}},
		{"dotted identifiers", "shared.SharedStruct Numberz.ONE a.b.c", []tok{
			{tokIdent, "shared.SharedStruct", 1, 1}, {tokIdent, "Numberz.ONE", 1, 21}, {tokIdent, "a.b.c", 1, 33}}},
		{"keywords versus hint words", "hint s_hint c_hint oneway", []tok{
			{tokIdent, "hint", 1, 1}, {tokIdent, "s_hint", 1, 6}, {tokIdent, "c_hint", 1, 13}, {tokKeyword, "oneway", 1, 20}}},
		{"integers", "1 -2 +3 0x1F -0x10", []tok{
			{tokInt, "1", 1, 1}, {tokInt, "-2", 1, 3}, {tokInt, "+3", 1, 6}, {tokInt, "0x1F", 1, 9}, {tokInt, "-0x10", 1, 14}}},
		{"doubles", "1.5 -0.25 .5 1e10 2.5E-3", []tok{
			{tokFloat, "1.5", 1, 1}, {tokFloat, "-0.25", 1, 5}, {tokFloat, ".5", 1, 11}, {tokFloat, "1e10", 1, 14}, {tokFloat, "2.5E-3", 1, 19}}},
		{"sizes", "4KB 4KiB 1MB 512B", []tok{
			{tokSize, "4KB", 1, 1}, {tokSize, "4KiB", 1, 5}, {tokSize, "1MB", 1, 10}, {tokSize, "512B", 1, 14}}},
		{"strings keep their quotes", `"a\"b" 'c\'d'`, []tok{{tokString, `"a\"b"`, 1, 1}, {tokString, `'c\'d'`, 1, 8}}},
		{"punctuation", ":;,{}()=<>[]*&", []tok{
			{tokPunct, ":", 1, 1}, {tokPunct, ";", 1, 2}, {tokPunct, ",", 1, 3}, {tokPunct, "{", 1, 4}, {tokPunct, "}", 1, 5},
			{tokPunct, "(", 1, 6}, {tokPunct, ")", 1, 7}, {tokPunct, "=", 1, 8}, {tokPunct, "<", 1, 9}, {tokPunct, ">", 1, 10},
			{tokPunct, "[", 1, 11}, {tokPunct, "]", 1, 12}, {tokPunct, "*", 1, 13}, {tokPunct, "&", 1, 14}}},
		{"columns count runes", "/* é€ */ x\n\tyy", []tok{{tokIdent, "x", 1, 10}, {tokIdent, "yy", 2, 2}}},
		{"empty comment", "/**/ a", []tok{{tokIdent, "a", 1, 6}}},
		{"byte order mark", "\xEF\xBB\xBFstruct", []tok{{tokKeyword, "struct", 1, 1}}},
		{"map closing angle brackets", "map<i32,list<i32>>", []tok{
			{tokKeyword, "map", 1, 1}, {tokPunct, "<", 1, 4}, {tokKeyword, "i32", 1, 5}, {tokPunct, ",", 1, 8},
			{tokKeyword, "list", 1, 9}, {tokPunct, "<", 1, 13}, {tokKeyword, "i32", 1, 14}, {tokPunct, ">", 1, 17}, {tokPunct, ">", 1, 18}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := lex("f.thrift", tc.src)
			require.NoError(t, err)
			require.True(t, res.tokens[len(res.tokens)-1].EOF())
			var got []tok
			for _, tk := range res.tokens[:len(res.tokens)-1] {
				got = append(got, tok{tk.Type, tk.Value, tk.Pos.Line, tk.Pos.Column})
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLexDocComments(t *testing.T) {
	src := "/**\n * First line.\n *   indented\n */\nstruct A {\n  /** field doc */ 1: i32 x\n}\n/** dangling */"
	res, err := lex("f.thrift", src)
	require.NoError(t, err)
	docs := map[string]string{}
	for _, tk := range res.tokens {
		if d, ok := res.docs[tk.Pos.Offset]; ok {
			docs[tk.Value] = d
		}
	}
	assert.Equal(t, map[string]string{"struct": "First line.\n  indented", "1": "field doc"}, docs)
}

func TestUnquote(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`"plain"`, "plain"},
		{`'single'`, "single"},
		{`"a\nb\tc\rd"`, "a\nb\tc\rd"},
		{`"q\"q\'q\\"`, `q"q'q\`},
		{`""`, ""},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, unquote(tc.raw), tc.raw)
	}
}

func TestParseInt(t *testing.T) {
	tests := []struct {
		text string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-1", -1, true}, {"+7", 7, true}, {"0x7fffffffffffffff", 1<<63 - 1, true},
		{"-0x8000000000000000", -1 << 63, true}, {"9223372036854775808", 0, false}, {"0x", 0, false},
	}
	for _, tc := range tests {
		got, err := parseInt(tc.text)
		if !tc.ok {
			assert.Error(t, err, tc.text)
			continue
		}
		require.NoError(t, err, tc.text)
		assert.Equal(t, tc.want, got, tc.text)
	}
}
