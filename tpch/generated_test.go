package tpch

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGeneratedCodeUpToDate regenerates gen/ as doc.go's first
// go:generate line does and requires the checked-in files to be the same.
func TestGeneratedCodeUpToDate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, "go", "tool", "hatgen", "generate", "-o", out,
		"--go-package", "github.com/hatrpc/hatrpc/tpch/gen", "idl/TCLIService.thrift", "idl/hs2.thrift",
		"idl/exchange_base.thrift", "idl/exchange.thrift")
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", msg)
	requireSame(t, out, "gen")
}

// TestApacheCodeUpToDate regenerates apachegen/ (the vanilla exchange:
// Apache Thrift's compiler, Debian's thrift-compiler from `make deps`)
// as doc.go's second go:generate line does.
func TestApacheCodeUpToDate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := t.TempDir()
	msg, err := exec.CommandContext(ctx, "thrift", "--gen", "go:package_prefix=github.com/hatrpc/hatrpc/tpch/apachegen/,skip_remote",
		"-out", out, "idl/exchange_base.thrift").CombinedOutput()
	require.NoError(t, err, "%s (thrift-compiler is installed by `make deps`)", msg)
	msg, err = exec.CommandContext(ctx, "gofmt", "-w", out).CombinedOutput()
	require.NoError(t, err, "%s", msg)
	requireSame(t, out, "apachegen")
}

func requireSame(t *testing.T, fresh, checkedIn string) {
	t.Helper()
	want := files(t, fresh)
	got := files(t, checkedIn)
	require.ElementsMatch(t, keys(want), keys(got), "run `go generate` in tpch/")
	for name, w := range want {
		require.Equal(t, w, got[name], "%s is stale: run `go generate` in tpch/", name)
	}
}

func files(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		m[rel] = string(b)
		return err
	}))
	return m
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
