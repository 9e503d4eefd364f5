package idl

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// Token types of the Thrift lexer. Keywords get their own type so that the
// grammar's @Ident never captures a reserved word as a name, while quoted
// literals in the grammar ("struct") still match them by value.
const (
	tokEOF                     = lexer.EOF
	tokIdent   lexer.TokenType = -2
	tokKeyword lexer.TokenType = -3
	tokInt     lexer.TokenType = -4
	tokFloat   lexer.TokenType = -5
	tokString  lexer.TokenType = -6 // Value keeps the quotes so it never equals a punctuation literal
	tokSize    lexer.TokenType = -7 // number with a unit suffix (4KB); only hint values accept it
	tokPunct   lexer.TokenType = -8
)

var tokenSymbols = map[string]lexer.TokenType{
	"EOF":     tokEOF,
	"Ident":   tokIdent,
	"Keyword": tokKeyword,
	"Int":     tokInt,
	"Float":   tokFloat,
	"String":  tokString,
	"Size":    tokSize,
	"Punct":   tokPunct,
}

// keywords are the reserved words of current Apache Thrift (thriftl.ll).
// hint, s_hint and c_hint are deliberately not reserved: plain Thrift files
// may use them as names, and the grammar tells them apart by the following ':'.
var keywords = map[string]bool{
	"namespace": true, "cpp_include": true, "cpp_type": true, "include": true,
	"void": true, "bool": true, "byte": true, "i8": true, "i16": true, "i32": true,
	"i64": true, "double": true, "string": true, "binary": true, "slist": true,
	"senum": true, "map": true, "list": true, "set": true, "uuid": true,
	"oneway": true, "async": true, "typedef": true, "struct": true, "union": true,
	"exception": true, "extends": true, "throws": true, "service": true,
	"enum": true, "const": true, "required": true, "optional": true,
	"true": true, "false": true, "xsd_all": true, "xsd_optional": true,
	"xsd_nillable": true, "xsd_attrs": true,
}

// maxNesting bounds bracket nesting; real IDL stays in single digits.
const maxNesting = 100

// lexError is a lexical error; lexing stops at the first one because the
// rest of the file can no longer be tokenised reliably.
type lexError struct {
	pos lexer.Position
	msg string
}

func (e *lexError) Error() string { return fmt.Sprintf("%s: %s", e.pos, e.msg) }

// lexResult is the token stream plus the doc comments, keyed by the byte
// offset of the token that follows each one (that is where they attach).
type lexResult struct {
	tokens []lexer.Token
	docs   map[int]string
}

type scanner struct {
	src     string
	file    string
	off     int
	line    int
	col     int
	depth   int    // bracket nesting, bounded so the recursive parser cannot exhaust the stack
	pending string // last doc comment not yet attached to a token
	hasDoc  bool
	out     lexResult
}

// lex tokenises a whole Thrift source.
func lex(file, src string) (*lexResult, error) {
	s := &scanner{src: src, file: file, line: 1, col: 1}
	if strings.HasPrefix(src, "\xEF\xBB\xBF") {
		s.off = 3 // a UTF-8 byte order mark is skipped, as Apache does, and takes no column
	}
	s.out.tokens = make([]lexer.Token, 0, len(src)/4)
	for {
		if err := s.skipSpaceAndComments(); err != nil {
			return &s.out, err
		}
		if s.off >= len(s.src) {
			s.out.tokens = append(s.out.tokens, lexer.EOFToken(s.pos()))
			return &s.out, nil
		}
		if err := s.token(); err != nil {
			return &s.out, err
		}
	}
}

func (s *scanner) pos() lexer.Position {
	return lexer.Position{Filename: s.file, Offset: s.off, Line: s.line, Column: s.col}
}

// advance moves over n bytes, keeping line and rune-based column current.
func (s *scanner) advance(n int) {
	end := s.off + n
	for s.off < end {
		c := s.src[s.off]
		if c == '\n' {
			s.line++
			s.col = 1
			s.off++
			continue
		}
		_, size := utf8.DecodeRuneInString(s.src[s.off:])
		s.off += size
		s.col++
	}
}

func (s *scanner) peekByte(i int) byte {
	if s.off+i < len(s.src) {
		return s.src[s.off+i]
	}
	return 0
}

func (s *scanner) skipSpaceAndComments() error {
	for s.off < len(s.src) {
		c := s.src[s.off]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			s.advance(1)
		case c == '#' || (c == '/' && s.peekByte(1) == '/'):
			end := strings.IndexByte(s.src[s.off:], '\n')
			if end < 0 {
				end = len(s.src) - s.off
			}
			s.advance(end)
		case c == '/' && s.peekByte(1) == '*':
			start := s.pos()
			end := strings.Index(s.src[s.off+2:], "*/")
			doc := s.peekByte(2) == '*' && s.peekByte(3) != '/'
			if end < 0 {
				what := "comment"
				if doc {
					what = "doc comment"
				}
				return &lexError{start, "unterminated " + what + " (missing \"*/\")"}
			}
			body := s.src[s.off+2 : s.off+2+end]
			s.advance(end + 4)
			if doc {
				s.pending = cleanDoc(body[1:])
				s.hasDoc = true
			}
		default:
			return nil
		}
	}
	return nil
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *scanner) emit(t lexer.TokenType, n int) {
	p := s.pos()
	if s.hasDoc {
		if s.out.docs == nil {
			s.out.docs = map[int]string{}
		}
		s.out.docs[p.Offset] = s.pending
		s.hasDoc = false
	}
	s.out.tokens = append(s.out.tokens, lexer.Token{Type: t, Value: s.src[s.off : s.off+n], Pos: p})
	s.advance(n)
}

func (s *scanner) token() error {
	c := s.src[s.off]
	switch {
	case isIdentStart(c):
		n := 1
		for s.off+n < len(s.src) {
			d := s.src[s.off+n]
			if isIdentChar(d) {
				n++
				continue
			}
			// Apache identifiers may contain dots, but never end in one.
			if d == '.' && s.off+n+1 < len(s.src) && isIdentChar(s.src[s.off+n+1]) {
				n += 2
				continue
			}
			break
		}
		t := tokIdent
		if keywords[s.src[s.off:s.off+n]] {
			t = tokKeyword
		}
		s.emit(t, n)
		return nil
	case isDigit(c) || ((c == '+' || c == '-' || c == '.') && (isDigit(s.peekByte(1)) ||
		(c != '.' && s.peekByte(1) == '.' && isDigit(s.peekByte(2))))):
		return s.number()
	case c == '"' || c == '\'':
		return s.str(c)
	case strings.IndexByte(":;,{}()=<>[]*&", c) >= 0:
		switch c {
		case '{', '(', '<', '[':
			s.depth++
			if s.depth > maxNesting {
				return &lexError{s.pos(), fmt.Sprintf("brackets nested deeper than %d levels", maxNesting)}
			}
		case '}', ')', '>', ']':
			if s.depth > 0 {
				s.depth--
			}
		}
		s.emit(tokPunct, 1)
		return nil
	}
	r, _ := utf8.DecodeRuneInString(s.src[s.off:])
	return &lexError{s.pos(), fmt.Sprintf("unexpected character %q", r)}
}

// number scans Apache's intconstant, hexconstant and dubconstant; digits
// glued to letters (4KB, 4KiB) form a size token for hint values.
func (s *scanner) number() error {
	start := s.pos()
	i := s.off
	if s.src[i] == '+' || s.src[i] == '-' {
		i++
	}
	kind := tokInt
	if i+1 < len(s.src) && s.src[i] == '0' && (s.src[i+1] == 'x' || s.src[i+1] == 'X') &&
		i+2 < len(s.src) && isHex(s.src[i+2]) {
		i += 2
		for i < len(s.src) && isHex(s.src[i]) {
			i++
		}
	} else {
		for i < len(s.src) && isDigit(s.src[i]) {
			i++
		}
		if i+1 < len(s.src) && s.src[i] == '.' && isDigit(s.src[i+1]) {
			kind = tokFloat
			i++
			for i < len(s.src) && isDigit(s.src[i]) {
				i++
			}
		}
		if i < len(s.src) && (s.src[i] == 'e' || s.src[i] == 'E') {
			j := i + 1
			if j < len(s.src) && (s.src[j] == '+' || s.src[j] == '-') {
				j++
			}
			if j < len(s.src) && isDigit(s.src[j]) {
				kind = tokFloat
				for j < len(s.src) && isDigit(s.src[j]) {
					j++
				}
				i = j
			}
		}
	}
	if i < len(s.src) && isIdentStart(s.src[i]) {
		kind = tokSize
		for i < len(s.src) && isIdentChar(s.src[i]) {
			i++
		}
	}
	n := i - s.off
	if kind == tokInt {
		if _, err := parseInt(s.src[s.off:i]); err != nil {
			return &lexError{start, fmt.Sprintf("integer constant %s is out of range", s.src[s.off:i])}
		}
	}
	s.emit(kind, n)
	return nil
}

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// parseInt parses a decimal or 0x-hex integer with an optional sign.
func parseInt(text string) (int64, error) {
	neg := false
	body := text
	if body != "" && (body[0] == '+' || body[0] == '-') {
		neg = body[0] == '-'
		body = body[1:]
	}
	base := 10
	if len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		base = 16
		body = body[2:]
	}
	u, err := strconv.ParseUint(body, base, 64)
	if err != nil {
		return 0, err
	}
	if neg {
		if u > 1<<63 {
			return 0, strconv.ErrRange
		}
		return -int64(u), nil
	}
	if u > 1<<63-1 {
		return 0, strconv.ErrRange
	}
	return int64(u), nil
}

func (s *scanner) str(quote byte) error {
	start := s.pos()
	i := s.off + 1
	for i < len(s.src) {
		switch s.src[i] {
		case quote:
			s.emit(tokString, i+1-s.off)
			return nil
		case '\n':
			return &lexError{start, "unterminated string literal (newline before closing quote)"}
		case '\\':
			if i+1 >= len(s.src) {
				return &lexError{start, "unterminated string literal"}
			}
			if strings.IndexByte(`rnt"'\`, s.src[i+1]) < 0 {
				p := start
				p.Offset = i
				p.Column += utf8.RuneCountInString(s.src[s.off:i])
				r, _ := utf8.DecodeRuneInString(s.src[i+1:])
				if !unicode.IsPrint(r) {
					return &lexError{p, fmt.Sprintf("invalid escape sequence %q in string literal", `\`+string(r))}
				}
				return &lexError{p, fmt.Sprintf("invalid escape sequence \"\\%c\" in string literal", r)}
			}
			i += 2
			continue
		}
		i++
	}
	return &lexError{start, "unterminated string literal"}
}

// unquote decodes a string token validated by the lexer.
func unquote(raw string) string {
	if len(raw) < 2 {
		return raw
	}
	body := raw[1 : len(raw)-1]
	if strings.IndexByte(body, '\\') < 0 {
		return body
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' || i+1 >= len(body) {
			b.WriteByte(c)
			continue
		}
		i++
		switch body[i] {
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		default:
			b.WriteByte(body[i])
		}
	}
	return b.String()
}

// cleanDoc strips comment decoration exactly like Apache's
// clean_up_doctext, so docs match what the Apache generators emit: the
// first line is left-trimmed, a common "  *" column is removed from the
// others, then their common indentation and all trailing blanks.
func cleanDoc(body string) string {
	body = strings.ReplaceAll(body, "\r", "")
	lines := strings.Split(body, "\n")
	if strings.TrimLeft(lines[len(lines)-1], " \t") == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	lines[0] = strings.TrimLeft(lines[0], " \t")
	rest := lines[1:]
	prefix, found, have := 0, false, true
	for i, l := range rest {
		if l == "" {
			continue
		}
		pos := len(l) - len(strings.TrimLeft(l, " \t"))
		switch {
		case pos == len(l):
			rest[i] = ""
		case !found && l[pos] == '*':
			found, prefix = true, pos
		case found && l[pos] == '*' && pos == prefix:
		default:
			have = false
		}
		if !have {
			break
		}
	}
	if have {
		for i, l := range rest {
			rest[i] = l[min(len(l), prefix+1):]
		}
	}
	indent := -1
	for _, l := range rest {
		if t := strings.TrimLeft(l, " \t"); t != "" && (indent < 0 || len(l)-len(t) < indent) {
			indent = len(l) - len(t)
		}
	}
	for i, l := range rest {
		if indent > 0 {
			rest[i] = l[min(len(l), indent):]
		}
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	if lines[0] == "" {
		lines = lines[1:]
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// thriftLexer adapts lex to participle's lexer.Definition so the grammar can
// refer to token types by name; parsing itself feeds pre-lexed tokens.
type thriftLexer struct{}

func (thriftLexer) Symbols() map[string]lexer.TokenType { return tokenSymbols }

func (thriftLexer) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	res, err := lex(filename, string(b))
	if err != nil {
		return nil, err
	}
	return &sliceLexer{tokens: res.tokens}, nil
}

type sliceLexer struct {
	tokens []lexer.Token
	i      int
}

func (l *sliceLexer) Next() (lexer.Token, error) {
	if l.i >= len(l.tokens) {
		return l.tokens[len(l.tokens)-1], nil
	}
	t := l.tokens[l.i]
	l.i++
	return t, nil
}
