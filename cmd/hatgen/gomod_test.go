package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestModulePath(t *testing.T) {
	tests := []struct {
		name, gomod, want, err string
	}{
		{"plain", "module example.com/svc\n\ngo 1.26\n", "example.com/svc", ""},
		{"after comments", "// my service\nmodule example.com/svc // the module\n", "example.com/svc", ""},
		{"quoted", "module \"example.com/q\"\n", "example.com/q", ""},
		{"not a prefix", "modules x\nmodule a/b\n", "a/b", ""},
		{"missing", "go 1.26\n", "", "no module directive"},
		{"empty", "module\n", "", "module directive without a path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := modulePath([]byte(tc.gomod))
			if tc.err != "" {
				assert.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestGenerateDefaultGoPackage: without --go-package, generated packages
// import each other by the module path from go.mod plus the output
// directory's place in the module, so a module's includes build.
func TestGenerateDefaultGoPackage(t *testing.T) {
	mod := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/svc\n\ngo 1.26\n"), 0o644))
	includes, err := filepath.Abs("../../internal/codegen/testdata/cases/includes/includes.thrift")
	require.NoError(t, err)
	tests := []struct {
		name, out, want string
	}{
		{"subdirectory", filepath.Join(mod, "internal", "gen"), `"example.com/svc/internal/gen/base/shared"`},
		{"module root", mod, `"example.com/svc/base/shared"`},
		{"relative -o", "internal/rel", `"example.com/svc/internal/rel/base/shared"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(mod)
			code, _, stderr := runHatgen("generate", "-o", tc.out, includes)
			require.Equal(t, 0, code, stderr)
			assert.Empty(t, stderr)
			out := tc.out
			if !filepath.IsAbs(out) {
				out = filepath.Join(mod, out)
			}
			src, err := os.ReadFile(filepath.Join(out, "app", "core", "includes.go"))
			require.NoError(t, err)
			assert.Contains(t, string(src), tc.want)
		})
	}

	t.Run("no go.mod", func(t *testing.T) {
		dir := t.TempDir() // under the system temp dir: no go.mod above it
		code, _, stderr := runHatgen("generate", "-o", dir, includes)
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, "hatgen: warning: no go.mod above "+dir+": included packages are imported by their directory alone; pass --go-package",
			strings.TrimSpace(stderr))
	})

	t.Run("explicit --go-package wins", func(t *testing.T) {
		out := filepath.Join(mod, "x")
		code, _, stderr := runHatgen("generate", "-o", out, "--go-package", "other.org/y", includes)
		require.Equal(t, 0, code, stderr)
		src, err := os.ReadFile(filepath.Join(out, "app", "core", "includes.go"))
		require.NoError(t, err)
		assert.Contains(t, string(src), `"other.org/y/base/shared"`)
	})
}

func TestVersion(t *testing.T) {
	code, out, stderr := runHatgen("--version")
	require.Equal(t, 0, code, stderr)
	// cobra's "NAME version VERSION"; a test binary carries no module version.
	assert.Equal(t, "hatgen version devel\n", out)
}
