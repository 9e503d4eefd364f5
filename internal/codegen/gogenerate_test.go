package codegen_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const gogenDir = "testdata/gogen"

// TestGoGenerate copies the go:generate example into a scratch package in
// the module, runs `go generate` there (which `go run`s cmd/hatgen), checks
// the output against the checked-in copy and vets it.
func TestGoGenerate(t *testing.T) {
	tmp, err := os.MkdirTemp("testdata", "tmp-gogen-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(tmp) })
	for _, f := range []string{"gogen.go", "echo.thrift"} {
		b, err := os.ReadFile(filepath.Join(gogenDir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(tmp, f), b, 0o644))
	}
	goTool(t, 5*time.Minute, "generate", "./"+selfPath+"/"+filepath.ToSlash(tmp))

	got := goFilesUnder(t, filepath.Join(tmp, "echo"))
	require.Equal(t, []string{"echo.go", "echoserver/echo.go"}, got)
	for _, f := range got {
		gen, err := os.ReadFile(filepath.Join(tmp, "echo", f))
		require.NoError(t, err)
		want := filepath.Join(gogenDir, "echo", f)
		if *update {
			require.NoError(t, os.MkdirAll(filepath.Dir(want), 0o755))
			require.NoError(t, os.WriteFile(want, gen, 0o644))
		}
		wantSrc, err := os.ReadFile(want)
		require.NoError(t, err)
		require.Equal(t, string(wantSrc), string(gen), "%s is stale (run go test ./internal/codegen -update)", want)
	}
	vetPackages(t, tmp)
}
