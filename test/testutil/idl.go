package testutil

import (
	"regexp"
	"strings"
)

var (
	lineComment = regexp.MustCompile(`(?m)//.*$`)
	hintBlock   = regexp.MustCompile(`\[\s*((hint|s_hint|c_hint)\s*:[^;\]]*;\s*)*\]`)
	hintGroup   = regexp.MustCompile(`\b(hint|s_hint|c_hint)\s*:[^;]*;`)
	blank       = regexp.MustCompile(`\s+`)
	sepSpace    = regexp.MustCompile(`\s+([,;])`)
)

// StripHints removes comments and HatRPC hint groups from IDL source and
// normalises white space, so that a hinted IDL and its hint-free copy can
// be compared.
func StripHints(src string) string {
	s := lineComment.ReplaceAllString(src, "")
	s = hintBlock.ReplaceAllString(s, "")
	s = hintGroup.ReplaceAllString(s, "")
	s = sepSpace.ReplaceAllString(s, "$1")
	return strings.TrimSpace(blank.ReplaceAllString(s, " "))
}
