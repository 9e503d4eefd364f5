// Package testenv locates what tests need from their environment: the
// repository root and the shared IDL corpus beside it. It imports nothing of
// the module, so any package's tests (pkg/ included) may use it.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot walks up from the working directory to the directory holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// SharedIDLDir is the real-world IDL corpus: $HATRPC_SHARED/idl when set,
// else ../shared/idl beside the repository (where CI puts it). The corpus is
// part of the acceptance criteria, so its absence fails the test instead of
// skipping it.
func SharedIDLDir(t testing.TB) string {
	t.Helper()
	base := os.Getenv("HATRPC_SHARED")
	if base == "" {
		base = filepath.Join(RepoRoot(t), "..", "shared")
	}
	dir := filepath.Join(base, "idl")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("shared IDL corpus not found at %s (set HATRPC_SHARED)", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("abs %s: %v", dir, err)
	}
	return abs
}
