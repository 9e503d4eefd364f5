package idl

import (
	"fmt"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// syntaxAbort carries a syntax error out of a hand-written production.
// Once `hint:` or `[` has committed the parser to a hint construct, any
// later mistake is definitive; unwinding participle's backtracking with a
// panic keeps the precise message instead of a vaguer alternative's.
type syntaxAbort struct {
	pos lexer.Position
	msg string
}

func abortf(pos lexer.Position, format string, args ...any) {
	panic(&syntaxAbort{pos: pos, msg: fmt.Sprintf(format, args...)})
}

var hintSides = map[string]HintSide{"hint": HintShared, "s_hint": HintServer, "c_hint": HintClient}

// astHintGroup is `hint: k=v, k=v;` (also s_hint / c_hint).
type astHintGroup struct {
	Pos     lexer.Position
	End     int // byte offset just past the group (hatgen plain cuts it out)
	Keyword string
	Side    HintSide
	Entries []*HintEntry
}

// describe renders a token for "found ..." in messages.
func describe(t *lexer.Token) string {
	if t.EOF() {
		return "end of file"
	}
	return fmt.Sprintf("%q", t.Value)
}

func isPunct(t *lexer.Token, v string) bool { return t.Type == tokPunct && t.Value == v }

// Parse implements participle.Parseable.
func (g *astHintGroup) Parse(lex *lexer.PeekingLexer) error { return g.parse(lex, false) }

// parse reads one group; inBlock allows the last group of a function hint
// block to end at "]" instead of ";".
func (g *astHintGroup) parse(lex *lexer.PeekingLexer, inBlock bool) error {
	cp := lex.MakeCheckpoint()
	head := lex.Peek()
	side, ok := hintSides[head.Value]
	if head.Type != tokIdent || !ok {
		return participle.NextMatch
	}
	lex.Next()
	if !isPunct(lex.Peek(), ":") {
		lex.LoadCheckpoint(cp)
		return participle.NextMatch
	}
	lex.Next()
	g.Pos, g.Keyword, g.Side = head.Pos, head.Value, side
	prev := head.Value + ":"
	for {
		k := lex.Peek()
		if k.Type != tokIdent && k.Type != tokKeyword {
			if len(g.Entries) == 0 && (isPunct(k, ";") || inBlock && isPunct(k, "]")) {
				abortf(k.Pos, "empty hint group: expected key=value after %q", prev)
			}
			abortf(k.Pos, "expected hint key after %s, found %s", prev, describe(k))
		}
		lex.Next()
		eq := lex.Peek()
		if !isPunct(eq, "=") {
			abortf(eq.Pos, "missing \"=\" after hint key %q (found %s)", k.Value, describe(eq))
		}
		lex.Next()
		v := lex.Peek()
		e := &HintEntry{Key: k.Value, Value: v.Value, Pos: toPos(k.Pos), ValuePos: toPos(v.Pos)}
		switch v.Type {
		case tokIdent, tokKeyword:
			e.Kind = HintIdent
		case tokInt, tokFloat:
			e.Kind = HintNumber
		case tokSize:
			e.Kind = HintSize
		case tokString:
			e.Kind, e.Value = HintString, unquote(v.Value)
		default:
			abortf(v.Pos, "missing value for hint key %q (found %s)", k.Value, describe(v))
		}
		lex.Next()
		g.Entries = append(g.Entries, e)
		prev = k.Value + "=" + v.Value
		sep := lex.Peek()
		switch {
		case isPunct(sep, ","):
			lex.Next()
			prev += ","
		case isPunct(sep, ";"):
			lex.Next()
			g.End = sep.Pos.Offset + len(sep.Value)
			return nil
		case inBlock && isPunct(sep, "]"):
			g.End = v.Pos.Offset + len(v.Value)
			return nil
		default:
			abortf(sep.Pos, "expected \",\" or \";\" after hint %s, found %s", prev, describe(sep))
		}
	}
}

// astHintBlock is the function-level `[ hint-groups ]`.
type astHintBlock struct {
	Pos    lexer.Position
	End    int // byte offset just past "]"
	Groups []*astHintGroup
}

// Parse implements participle.Parseable.
func (b *astHintBlock) Parse(lex *lexer.PeekingLexer) error {
	open := lex.Peek()
	if !isPunct(open, "[") {
		return participle.NextMatch
	}
	lex.Next()
	b.Pos = open.Pos
	for {
		t := lex.Peek()
		if isPunct(t, "]") {
			lex.Next()
			b.End = t.Pos.Offset + len(t.Value)
			return nil
		}
		g := &astHintGroup{}
		if err := g.parse(lex, true); err != nil {
			if t.EOF() {
				abortf(t.Pos, "unexpected end of file in function hints opened at %d:%d (missing \"]\")", open.Pos.Line, open.Pos.Column)
			}
			abortf(t.Pos, "expected hint group (hint:, s_hint: or c_hint:) or \"]\" in function hints, found %s", describe(t))
		}
		b.Groups = append(b.Groups, g)
	}
}

func toPos(p lexer.Position) Pos { return Pos{File: p.Filename, Line: p.Line, Col: p.Column} }
