package idl

import (
	"slices"
	"strings"
)

// StripHints returns src, a Thrift file named file, with every HatRPC hint
// group and function hint block removed and everything else (comments,
// layout, annotations) kept byte for byte: the plain IDL other Thrift
// compilers accept. A hint group alone on its line takes the line with it.
// A syntax error comes back as a *Diagnostic (`file:line:col: message`).
func StripHints(file string, src []byte) ([]byte, error) {
	text := string(src)
	pf, diag := parseSource(file, text)
	if diag != nil {
		return nil, diag
	}
	spans := hintSpans(pf.doc)
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var out strings.Builder
	out.Grow(len(text))
	last := 0
	for _, sp := range spans {
		if sp[0] < last { // a group inside a block already cut
			continue
		}
		start, end := widen(text, sp[0], sp[1])
		out.WriteString(text[last:start])
		if start > 0 && end < len(text) && isIdentChar(text[start-1]) && isIdentChar(text[end]) {
			out.WriteByte(' ') // `a hint: k=v;b` must not become `ab`
		}
		last = end
	}
	out.WriteString(text[last:])
	return []byte(out.String()), nil
}

// hintSpans lists the [start, end) byte ranges of every hint construct.
func hintSpans(doc *astDocument) [][2]int {
	var spans [][2]int
	group := func(g *astHintGroup) {
		if g != nil {
			spans = append(spans, [2]int{g.Pos.Offset, g.End})
		}
	}
	block := func(b *astHintBlock) {
		if b != nil {
			spans = append(spans, [2]int{b.Pos.Offset, b.End})
		}
	}
	for _, it := range doc.Items {
		group(it.Hint)
		switch {
		case it.Enum != nil:
			for _, m := range it.Enum.Members {
				group(m.Hint)
			}
		case it.Struct != nil:
			for _, m := range it.Struct.Members {
				group(m.Hint)
			}
		case it.Service != nil:
			for _, m := range it.Service.Members {
				group(m.Hint)
				if f := m.Function; f != nil {
					block(f.Hints)
					block(f.LateHints)
				}
			}
		}
	}
	return spans
}

// widen extends a cut over the blanks before it, and over its whole line
// when nothing else is on that line, so no stray blank lines or trailing
// spaces are left behind.
func widen(text string, start, end int) (int, int) {
	ls := start
	for ls > 0 && (text[ls-1] == ' ' || text[ls-1] == '\t') {
		ls--
	}
	le := end
	for le < len(text) && (text[le] == ' ' || text[le] == '\t' || text[le] == '\r') {
		le++
	}
	if (ls == 0 || text[ls-1] == '\n') && (le == len(text) || text[le] == '\n') {
		if le < len(text) {
			le++
		}
		return ls, le
	}
	return ls, end
}
