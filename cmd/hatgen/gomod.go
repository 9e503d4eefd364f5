package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// errNoModule: no go.mod above the output directory, so no import path can
// be derived for it.
var errNoModule = errors.New("no go.mod found")

// defaultGoPackage derives the import path of the output directory dir
// from the enclosing module, as `go build` would: the module path of the
// nearest go.mod above dir, joined with dir relative to that go.mod's
// directory. Generated packages import each other (one per included IDL
// file) by paths under it, so without it `import "base"` would not build.
func defaultGoPackage(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for root := abs; ; {
		data, err := os.ReadFile(filepath.Join(root, "go.mod"))
		if err == nil {
			mod, err := modulePath(data)
			if err != nil {
				return "", fmt.Errorf("%s: %w", filepath.Join(root, "go.mod"), err)
			}
			rel, err := filepath.Rel(root, abs)
			if err != nil {
				return "", err
			}
			if rel == "." {
				return mod, nil
			}
			return mod + "/" + filepath.ToSlash(rel), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", errNoModule
		}
		root = parent
	}
}

// modulePath returns the path of go.mod's module directive (the same rule
// as golang.org/x/mod/modfile.ModulePath: the first `module` line, its
// argument possibly quoted).
func modulePath(gomod []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "module")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '"' && rest[0] != '/') {
			continue
		}
		if i := strings.Index(rest, "//"); i >= 0 {
			rest = rest[:i]
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, `"`) || strings.HasPrefix(rest, "`") {
			p, err := strconv.Unquote(rest)
			if err != nil {
				return "", fmt.Errorf("bad module path %s", rest)
			}
			rest = p
		}
		if rest == "" {
			return "", errors.New("module directive without a path")
		}
		return rest, nil
	}
	return "", errors.New("no module directive")
}
