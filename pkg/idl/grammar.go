package idl

import (
	"sync"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// The participle grammar mirrors Apache Thrift's thrifty.yy. It is
// deliberately more permissive in a few places (hint groups anywhere, void
// as a field type) so that misplaced constructs get a precise semantic error
// instead of a generic "unexpected token".
//
// The HatRPC extension (paper, figure 7), parsed by hintparse.go:
//
//	Service   ::= 'service' Name ('extends' Name)? '{' HintGroup* Function* '}'
//	Function  ::= 'oneway'? Type Name '(' Field* ')' Throws? Annotations?
//	              ( FuncHints? Sep? | Sep? FuncHints? )
//	FuncHints ::= '[' HintGroup* ']'      (the last group may omit its ';')
//	HintGroup ::= ('hint' | 's_hint' | 'c_hint') ':' Key '=' Value (',' Key '=' Value)* ';'
//	Key       ::= identifier, dots allowed (kv.sync)
//	Value     ::= identifier | number | size (4KB, 4KiB) | string

type astDocument struct {
	Items []*astItem `parser:"@@*"`
}

type astItem struct {
	Pos        lexer.Position
	Include    *astInclude    `parser:"(  @@"`
	CppInclude *astCppInclude `parser:" | @@"`
	Namespace  *astNamespace  `parser:" | @@"`
	Typedef    *astTypedef    `parser:" | @@"`
	Const      *astConst      `parser:" | @@"`
	Enum       *astEnum       `parser:" | @@"`
	Senum      *astSenum      `parser:" | @@"`
	Struct     *astStruct     `parser:" | @@"`
	Service    *astService    `parser:" | @@"`
	Hint       *astHintGroup  `parser:" | @@ )"`
	Sep        string         `parser:"@(\";\" | \",\")?"`
}

type astInclude struct {
	Pos  lexer.Position
	Path *astStringLit `parser:"\"include\" @@"`
}

type astCppInclude struct {
	Pos  lexer.Position
	Path string `parser:"\"cpp_include\" @String"`
}

type astStringLit struct {
	Pos  lexer.Position
	Text string `parser:"@String"`
}

type astNamespace struct {
	Pos         lexer.Position
	Scope       string          `parser:"\"namespace\" @(\"*\" | Ident)"`
	Name        *astName        `parser:"@@"`
	Annotations *astAnnotations `parser:"@@?"`
}

type astTypedef struct {
	Pos         lexer.Position
	Type        *astType        `parser:"\"typedef\" @@"`
	Name        *astName        `parser:"@@"`
	Annotations *astAnnotations `parser:"@@?"`
}

type astConst struct {
	Pos         lexer.Position
	Type        *astType        `parser:"\"const\" @@"`
	Name        *astName        `parser:"@@"`
	Value       *astConstValue  `parser:"\"=\" @@"`
	Annotations *astAnnotations `parser:"@@?"`
}

// astName is an identifier with its own position (names often follow a type).
type astName struct {
	Pos  lexer.Position
	Name string `parser:"@Ident"`
}

// astFieldName is a field's name. Apache's compiler (THRIFT-5626, since
// 0.18) takes any keyword that cannot follow a field's name as one, so
// `1: i8 i8` or `2: list<string> list` are fields; so does hatgen.
type astFieldName struct {
	Pos  lexer.Position
	Name string `parser:"@(Ident | \"namespace\" | \"cpp_include\" | \"include\" | \"void\" | \"bool\" | \"byte\" | \"i8\" | \"i16\" | \"i32\" | \"i64\" | \"double\" | \"string\" | \"binary\" | \"uuid\" | \"map\" | \"list\" | \"set\" | \"oneway\" | \"async\" | \"typedef\" | \"struct\" | \"union\" | \"exception\" | \"extends\" | \"throws\" | \"service\" | \"enum\" | \"const\" | \"required\" | \"optional\")"`
}

type astEnum struct {
	Pos         lexer.Position
	Name        *astName         `parser:"\"enum\" @@"`
	Members     []*astEnumMember `parser:"\"{\" @@* \"}\""`
	Annotations *astAnnotations  `parser:"@@?"`
}

type astEnumMember struct {
	Hint  *astHintGroup `parser:"  @@"`
	Value *astEnumValue `parser:"| @@"`
}

type astEnumValue struct {
	Pos         lexer.Position
	Name        string          `parser:"@Ident"`
	Value       *astIntLit      `parser:"(\"=\" @@)?"`
	Annotations *astAnnotations `parser:"@@?"`
	Sep         string          `parser:"@(\";\" | \",\")?"`
}

type astIntLit struct {
	Pos  lexer.Position
	Text string `parser:"@Int"`
}

type astSenum struct {
	Pos         lexer.Position
	Name        *astName        `parser:"\"senum\" @@"`
	Values      []string        `parser:"\"{\" ( @String (\";\" | \",\")? )* \"}\""`
	Annotations *astAnnotations `parser:"@@?"`
}

type astStruct struct {
	Pos         lexer.Position
	Kind        string             `parser:"@(\"struct\" | \"union\" | \"exception\")"`
	Name        *astName           `parser:"@@"`
	XsdAll      bool               `parser:"@\"xsd_all\"?"`
	Members     []*astStructMember `parser:"\"{\" @@* \"}\""`
	Annotations *astAnnotations    `parser:"@@?"`
}

type astStructMember struct {
	Hint  *astHintGroup `parser:"  @@"`
	Field *astField     `parser:"| @@"`
}

type astField struct {
	Pos         lexer.Position
	ID          *astIntLit      `parser:"(@@ \":\")?"`
	Req         string          `parser:"@(\"required\" | \"optional\")?"`
	Type        *astType        `parser:"@@"`
	Ref         bool            `parser:"@\"&\"?"`
	Name        *astFieldName   `parser:"@@"`
	Default     *astConstValue  `parser:"(\"=\" @@)?"`
	XsdOptional bool            `parser:"@\"xsd_optional\"?"`
	XsdNillable bool            `parser:"@\"xsd_nillable\"?"`
	XsdAttrs    []*astField     `parser:"(\"xsd_attrs\" \"{\" @@* \"}\")?"`
	Annotations *astAnnotations `parser:"@@?"`
	Sep         string          `parser:"@(\";\" | \",\")?"`
}

type astType struct {
	Pos         lexer.Position
	Map         *astMapType     `parser:"(  @@"`
	Set         *astSetType     `parser:" | @@"`
	List        *astListType    `parser:" | @@"`
	Name        string          `parser:" | @(\"bool\" | \"byte\" | \"i8\" | \"i16\" | \"i32\" | \"i64\" | \"double\" | \"string\" | \"binary\" | \"slist\" | \"uuid\" | \"void\" | Ident) )"`
	Annotations *astAnnotations `parser:"@@?"`
}

type astMapType struct {
	CppType string   `parser:"\"map\" (\"cpp_type\" @String)?"`
	Key     *astType `parser:"\"<\" @@ \",\""`
	Value   *astType `parser:"@@ \">\""`
}

type astSetType struct {
	CppType string   `parser:"\"set\" (\"cpp_type\" @String)?"`
	Elem    *astType `parser:"\"<\" @@ \">\""`
}

type astListType struct {
	Elem    *astType `parser:"\"list\" \"<\" @@ \">\""`
	CppType string   `parser:"(\"cpp_type\" @String)?"`
}

type astAnnotations struct {
	Pos   lexer.Position
	Items []*astAnnotation `parser:"\"(\" ( @@ (\";\" | \",\")? )* \")\""`
}

type astAnnotation struct {
	Pos   lexer.Position
	Key   string  `parser:"@(Ident | Keyword)"`
	Value *string `parser:"(\"=\" @String)?"`
}

type astConstValue struct {
	Pos   lexer.Position
	Int   *string       `parser:"(  @Int"`
	Float *string       `parser:" | @Float"`
	Str   *string       `parser:" | @String"`
	Bool  *string       `parser:" | @(\"true\" | \"false\")"`
	Ident *string       `parser:" | @Ident"`
	List  *astConstList `parser:" | @@"`
	Map   *astConstMap  `parser:" | @@ )"`
}

type astConstList struct {
	Open  string           `parser:"@\"[\""`
	Items []*astConstValue `parser:"( @@ (\";\" | \",\")? )* \"]\""`
}

type astConstMap struct {
	Open    string             `parser:"@\"{\""`
	Entries []*astConstMapPair `parser:"( @@ (\";\" | \",\")? )* \"}\""`
}

type astConstMapPair struct {
	Key   *astConstValue `parser:"@@ \":\""`
	Value *astConstValue `parser:"@@"`
}

type astService struct {
	Pos         lexer.Position
	Name        *astName            `parser:"\"service\" @@"`
	Extends     *astName            `parser:"(\"extends\" @@)?"`
	Members     []*astServiceMember `parser:"\"{\" @@* \"}\""`
	Annotations *astAnnotations     `parser:"@@?"`
}

type astServiceMember struct {
	Hint     *astHintGroup `parser:"  @@"`
	Function *astFunction  `parser:"| @@"`
}

type astFunction struct {
	Pos         lexer.Position
	Oneway      string          `parser:"@(\"oneway\" | \"async\")?"`
	Returns     *astType        `parser:"@@"`
	Name        *astName        `parser:"@@"`
	Args        []*astField     `parser:"\"(\" @@* \")\""`
	Throws      *astThrows      `parser:"@@?"`
	Annotations *astAnnotations `parser:"@@?"`
	Hints       *astHintBlock   `parser:"@@?"`
	Sep         string          `parser:"@(\";\" | \",\")?"`
	LateHints   *astHintBlock   `parser:"@@?"`
	LateSep     string          `parser:"@(\";\" | \",\")?"`
}

type astThrows struct {
	Pos    lexer.Position
	Fields []*astField `parser:"\"throws\" \"(\" @@* \")\""`
}

// thriftParser builds the participle parser on first use; building it
// reflects over the whole grammar, so it must happen once per process, not
// per file. Lookahead 0 commits to an alternative as soon as it has consumed
// a token, so errors point at the real culprit instead of a backtracked
// earlier token (the grammar is LL(1) apart from hint groups, which do their
// own two-token lookahead).
var thriftParser = sync.OnceValue(func() *participle.Parser[astDocument] {
	return participle.MustBuild[astDocument](
		participle.Lexer(thriftLexer{}),
		participle.UseLookahead(0),
	)
})
