package idl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// parsedFile is the syntax tree of one file plus its doc comments.
type parsedFile struct {
	doc  *astDocument
	docs map[int]string
}

// parseSource lexes and parses one file; a syntax error stops that file and
// is returned as a single diagnostic.
func parseSource(file, src string) (pf *parsedFile, diag *Diagnostic) {
	res, err := lex(file, src)
	if err != nil {
		var le *lexError
		if errors.As(err, &le) {
			return nil, &Diagnostic{Pos: toPos(le.pos), Msg: le.msg, Kind: ErrSyntax}
		}
		return nil, &Diagnostic{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: err.Error(), Kind: ErrSyntax}
	}
	defer func() {
		if r := recover(); r != nil {
			sa, ok := r.(*syntaxAbort)
			if !ok {
				panic(r)
			}
			pf, diag = nil, &Diagnostic{Pos: toPos(sa.pos), Msg: sa.msg, Kind: ErrSyntax}
		}
	}()
	plex, err := lexer.Upgrade(&sliceLexer{tokens: res.tokens})
	if err != nil {
		return nil, &Diagnostic{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: err.Error(), Kind: ErrSyntax}
	}
	doc, err := thriftParser().ParseFromLexer(plex)
	if err != nil {
		return nil, syntaxDiagnostic(file, res.tokens, err)
	}
	return &parsedFile{doc: doc, docs: res.docs}, nil
}

// declKeywords start a top-level definition; meeting one inside an open
// block almost always means a "}" is missing.
var declKeywords = map[string]bool{
	"struct": true, "union": true, "exception": true, "enum": true, "senum": true,
	"service": true, "typedef": true, "const": true, "include": true,
	"cpp_include": true, "namespace": true,
}

// openBlock finds the innermost "{" still open before token index end and
// describes the construct it belongs to ("struct Foo").
func openBlock(tokens []lexer.Token, end int) (desc string, at lexer.Position, ok bool) {
	var stack []int
	for i := 0; i < end && i < len(tokens); i++ {
		if tokens[i].Type != tokPunct {
			continue
		}
		switch tokens[i].Value {
		case "{":
			stack = append(stack, i)
		case "}":
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if len(stack) == 0 {
		return "", lexer.Position{}, false
	}
	open := stack[len(stack)-1]
	desc = "block"
	for j := open - 1; j >= 0 && j >= open-5; j-- {
		t := tokens[j]
		if t.Type == tokKeyword && declKeywords[t.Value] && j+1 < open {
			desc = t.Value + " " + tokens[j+1].Value
			break
		}
		if t.Type == tokPunct {
			desc = "constant map"
			break
		}
	}
	return desc, tokens[open].Pos, true
}

func tokenIndex(tokens []lexer.Token, offset int) int {
	for i, t := range tokens {
		if t.Pos.Offset >= offset {
			return i
		}
	}
	return len(tokens)
}

// syntaxDiagnostic turns a participle error into a `file:line:col: message`
// diagnostic, recognising the common case of an unterminated block.
func syntaxDiagnostic(file string, tokens []lexer.Token, err error) *Diagnostic {
	var perr participle.Error
	if !errors.As(err, &perr) {
		return &Diagnostic{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: err.Error(), Kind: ErrSyntax}
	}
	pos := perr.Position()
	msg := perr.Message()
	var ute *participle.UnexpectedTokenError
	if errors.As(err, &ute) {
		tok := ute.Unexpected
		idx := tokenIndex(tokens, tok.Pos.Offset)
		desc, open, inBlock := openBlock(tokens, idx)
		switch {
		case isPunct(&tok, "=") && idx >= 2 && tokens[idx-1].Type == tokIdent && isHintKeyword(tokens[idx-2]):
			// `hint a=b;` parses as a function returning type "hint" until the "=".
			h := tokens[idx-2]
			return &Diagnostic{Pos: toPos(tokens[idx-1].Pos), Kind: ErrSyntax,
				Msg: fmt.Sprintf("missing \":\" after %q in hint group", h.Value)}
		case tok.EOF() && inBlock:
			if exp := expectedOf(ute.Message()); exp != "" && exp != `"}"` {
				msg = fmt.Sprintf("unexpected end of file (expected %s) inside %s opened at %d:%d", exp, desc, open.Line, open.Column)
				break
			}
			msg = fmt.Sprintf("unexpected end of file: %s opened at %d:%d is missing its closing \"}\"", desc, open.Line, open.Column)
		case inBlock && tok.Type == tokKeyword && declKeywords[tok.Value]:
			msg = fmt.Sprintf("unexpected %q inside %s opened at %d:%d: missing \"}\"?", tok.Value, desc, open.Line, open.Column)
		default:
			msg = "unexpected " + describe(&tok)
			if exp := expectedOf(ute.Message()); exp != "" {
				msg += " (expected " + exp + ")"
			} else if !inBlock {
				msg += " (expected a definition: include, namespace, typedef, const, enum, struct, union, exception or service)"
			}
		}
	}
	return &Diagnostic{Pos: toPos(pos), Msg: msg, Kind: ErrSyntax}
}

// productionWords names grammar productions in user terms.
var productionWords = map[string]string{
	"AstName": "identifier", "AstFieldName": "identifier", "AstType": "type", "AstField": "field", "AstConstValue": "constant value",
	"AstAnnotations": "annotations", "AstIntLit": "integer", "AstStringLit": "string literal",
	"AstEnumValue": "enum value", "AstItem": "definition", "AstHintGroup": "hint group",
	"AstHintBlock": "function hints", "AstServiceMember": "function", "AstStructMember": "field",
	"AstThrows": "throws", "AstConstList": "list", "AstConstMap": "map", "AstMapType": "map type",
	"AstSetType": "set type", "AstListType": "list type", "AstConstMapPair": "map entry",
	"AstFunction": "function", "AstInclude": "include", "AstNamespace": "namespace",
	"<ident>": "identifier", "<int>": "integer", "<string>": "string literal", "<float>": "number",
	"<keyword>": "keyword",
}

// expectedOf extracts participle's "(expected ...)" part and keeps only its
// first element in user terms: the full EBNF of the rest of a production
// is noise in a diagnostic.
func expectedOf(m string) string {
	i := strings.Index(m, "(expected ")
	if i < 0 || !strings.HasSuffix(m, ")") {
		return ""
	}
	exp := m[i+len("(expected ") : len(m)-1]
	depth, inQuote := 0, false
	for j := 0; j < len(exp); j++ {
		switch c := exp[j]; {
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case c == ' ' && depth == 0 && !(j+1 < len(exp) && exp[j+1] == '|') && !(j > 0 && exp[j-1] == '|'):
			exp = exp[:j]
		}
	}
	exp = strings.TrimSuffix(strings.TrimSuffix(exp, "?"), "*")
	fields := strings.Fields(exp)
	for k, f := range fields {
		core := strings.Trim(f, "()?*+")
		if w, ok := productionWords[core]; ok {
			fields[k] = strings.Replace(f, core, w, 1)
		}
	}
	return strings.Join(fields, " ")
}

func isHintKeyword(t lexer.Token) bool {
	_, ok := hintSides[t.Value]
	return ok && t.Type == tokIdent
}
