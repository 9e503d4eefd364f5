// Package doclinks_test checks the repository's Markdown: every relative
// link names a file that exists and, where it has a fragment, a heading of
// that file. Docs move sections between files (performance.md's dated
// paragraphs go to history.md), and a broken anchor fails no build.
package doclinks_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the repository's top, two levels above this package.
const root = "../.."

var (
	fenced   = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpan = regexp.MustCompile("`[^`\n]*`")
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading  = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t]*#*$`)
	// What GitHub drops from a heading's text to make its anchor: all
	// but letters, digits, '_', '-' and spaces.
	notAnchor = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// anchors are the fragments GitHub gives text's headings: lower case,
// punctuation dropped, spaces as '-', a repeat suffixed -1, -2, ...
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fenced.ReplaceAllString(text, ""), -1) {
		a := strings.ReplaceAll(notAnchor.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n, ok := seen[a]; ok {
			seen[a] = n + 1
			a += "-" + strconv.Itoa(n+1)
		} else {
			seen[a] = 0
		}
		out[a] = true
	}
	return out
}

// links are text's link targets outside code.
func links(text string) []string {
	text = codeSpan.ReplaceAllString(fenced.ReplaceAllString(text, ""), "")
	var out []string
	for _, m := range link.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "vendor", "shared":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

func TestAnchorsAndLinks(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		anchors []string
		links   []string
	}{
		{"punctuation and code", "## Issue 47's goals (2026-12-05) `a.b`\n", []string{"issue-47s-goals-2026-12-05-ab"}, nil},
		{"repeats", "# A\n## A\n### A\n", []string{"a", "a-1", "a-2"}, nil},
		{"fenced headings and links skipped", "```\n# not\n[x](y.md)\n```\n# yes\n", []string{"yes"}, nil},
		{"links outside code", "see [a](b.md#c) and `[d](e.md)` and [f](https://x/y)", nil, []string{"b.md#c", "https://x/y"}},
		{"unicode kept", "## Goal 4: TCP ≥ Apache × 1.25\n", []string{"goal-4-tcp--apache--125"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := anchors(tt.text)
			for _, a := range tt.anchors {
				require.True(t, got[a], "anchor %q in %v", a, got)
			}
			require.Len(t, got, len(tt.anchors))
			require.Equal(t, tt.links, links(tt.text))
		})
	}
}

// Every relative link in the repository's Markdown resolves: the file (or
// directory) exists, and a fragment into a Markdown file names one of its
// headings.
func TestRelativeLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	require.NotEmpty(t, files)
	texts := map[string]string{}
	read := func(p string) string {
		if s, ok := texts[p]; ok {
			return s
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		texts[p] = string(b)
		return texts[p]
	}
	var broken []string
	for _, f := range files {
		for _, l := range links(read(f)) {
			if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(l, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(target); err != nil {
					broken = append(broken, f+": "+l+": no such file")
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if !anchors(read(target))[frag] {
				broken = append(broken, f+": "+l+": no such heading")
			}
		}
	}
	require.Empty(t, broken, "broken links")
}
