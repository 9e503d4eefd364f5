package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocExamples runs every `$ hatrpc ...` line of docs/generic.md's
// console blocks against a fresh hatkv (the docs' 127.0.0.1:9090) and
// compares what it prints, stdout and stderr, with the lines that follow.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "generic.md"))
	require.NoError(t, err)
	addr := startHatKV(t)
	// The docs' closed port is 127.0.0.1:1; the test takes one it knows is
	// closed, as anything may listen on port 1 of a test machine.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	subst := strings.NewReplacer("127.0.0.1:9090", addr, "127.0.0.1:1 ", closed+" ", "127.0.0.1:1:", closed+":")
	type example struct {
		line string
		want []string
	}
	var examples []example
	inConsole := false
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case line == "```console":
			inConsole = true
		case line == "```":
			inConsole = false
		case inConsole && strings.HasPrefix(line, "$ hatrpc "):
			examples = append(examples, example{line: line})
		case inConsole && len(examples) > 0:
			ex := &examples[len(examples)-1]
			ex.want = append(ex.want, line)
		}
	}
	require.Len(t, examples, 13)
	for _, ex := range examples {
		t.Run(ex.line, func(t *testing.T) {
			args := shellWords(t, strings.TrimPrefix(ex.line, "$ hatrpc "))
			for i, a := range args {
				if a == "127.0.0.1:1" {
					a = closed
				}
				a = strings.ReplaceAll(a, "127.0.0.1:9090", addr)
				for _, dir := range []string{"internal/", "pkg/", "examples/"} {
					if strings.HasPrefix(a, dir) {
						a = filepath.Join("..", "..", a)
					}
				}
				args[i] = a
			}
			_, out, errOut := hatrpc(t, args...)
			want := subst.Replace(strings.Join(ex.want, "\n") + "\n")
			assert.Equal(t, want, out+errOut)
		})
	}
}

// shellWords splits a command line the way sh does for the docs'
// examples: words separated by spaces, single quotes kept together.
func shellWords(t *testing.T, s string) []string {
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "unterminated quote in %q", s)
	if inWord {
		out = append(out, cur.String())
	}
	return out
}
