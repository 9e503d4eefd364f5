package codegen

import (
	"strings"
)

// commonInitialisms is the set Apache's Go generator borrows from golint;
// names must match Apache's output exactly so handler code ports unchanged.
var commonInitialisms = map[string]bool{
	"API": true, "ASCII": true, "CPU": true, "CSS": true, "DNS": true, "EOF": true,
	"GUID": true, "HTML": true, "HTTP": true, "HTTPS": true, "ID": true, "IP": true,
	"JSON": true, "LHS": true, "QPS": true, "RAM": true, "RHS": true, "RPC": true,
	"SLA": true, "SMTP": true, "SSH": true, "TCP": true, "TLS": true, "TTL": true,
	"UDP": true, "UI": true, "UID": true, "UUID": true, "URI": true, "URL": true,
	"UTF8": true, "VM": true, "XML": true, "XSRF": true, "XSS": true,
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func toUpper(c byte) byte {
	if isLower(c) {
		return c - 'a' + 'A'
	}
	return c
}
func toLower(c byte) byte {
	if isUpper(c) {
		return c - 'A' + 'a'
	}
	return c
}

// fixInitialism upper-cases the word starting at i (up to the next '_') when
// it is a common initialism, as t_go_generator::fix_common_initialism does.
func fixInitialism(v []byte, i int) []byte {
	end := len(v)
	if j := strings.IndexByte(string(v[i:]), '_'); j >= 0 {
		end = i + j
	}
	word := strings.ToUpper(string(v[i:end]))
	if commonInitialisms[word] {
		copy(v[i:end], word)
	}
	return v
}

// camelcase mirrors t_go_generator::camelcase: `_x` becomes `X`, other
// underscores stay, and initialisms are fixed word by word.
func camelcase(s string) string {
	v := fixInitialism([]byte(s), 0)
	for i := 1; i < len(v)-1; i++ {
		if v[i] == '_' {
			if isLower(v[i+1]) {
				v = append(v[:i], append([]byte{toUpper(v[i+1])}, v[i+2:]...)...)
			}
			v = fixInitialism(v, i)
		}
	}
	return string(v)
}

// publicize mirrors t_go_generator::publicize for identifiers that are not
// args/result helper structs.
func publicize(s string) string { return publicizeFull(s, false, "") }

// publicizeFull is Apache's publicize: exported camel case, a `_` suffix for
// names that start with New or end with Args/Result (they would clash with
// constructors and service helpers), and the service prefix for helpers.
func publicizeFull(s string, argsOrResult bool, service string) string {
	if s == "" {
		return s
	}
	prefix := ""
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		prefix, s = s[:i+1], s[i+1:]
	}
	if s == "" {
		return prefix
	}
	b := []byte(s)
	b[0] = toUpper(b[0])
	v := camelcase(string(b))
	n := len(v)
	if n >= 3 && v[:3] == "New" {
		v += "_"
	}
	if !argsOrResult {
		if (n >= 4 && v[n-4:n] == "Args") || (n >= 6 && v[n-6:n] == "Result") {
			v += "_"
		}
	} else {
		prefix += publicize(service)
	}
	if !isUpper(v[0]) && prefix == "" {
		// Apache leaves `_x` unexported, which breaks encoding/json tags and
		// vet; an X prefix keeps such names exported.
		v = "X" + v
	}
	return prefix + v
}

// goKeywords are the words Apache renames with an `_a1` suffix (it lists
// `error` too, which shadows the predeclared type in parameter lists).
var goKeywords = map[string]bool{
	"break": true, "case": true, "chan": true, "const": true, "continue": true,
	"default": true, "defer": true, "else": true, "error": true, "fallthrough": true,
	"for": true, "func": true, "go": true, "goto": true, "if": true, "import": true,
	"interface": true, "map": true, "package": true, "range": true, "return": true,
	"select": true, "struct": true, "switch": true, "type": true, "var": true,
}

// varName mirrors t_go_generator::variable_name_to_go_name, which names
// function parameters. Names the generated bodies use for themselves
// (ctx and the `_`-prefixed locals) are renamed the same way.
func varName(s string) string {
	l := strings.ToLower(s)
	if goKeywords[l] {
		return l + "_a1"
	}
	switch s {
	case "ctx", "proto", "client", "server", "hints", "errors", "fmt", "context",
		"_c", "_call", "_args", "_res", "_r", "_err":
		return s + "_a1"
	}
	return s
}

// argsName and resultName are the helper struct names of a function.
func argsName(svc, fn string) string   { return publicizeFull(fn+"_args", true, svc) }
func resultName(svc, fn string) string { return publicizeFull(fn+"_result", true, svc) }

// newName is the constructor name of a type (Apache's new_prefix).
func newName(typeName string) string { return "New" + typeName }
