package hatkv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/codegen"
	"github.com/hatrpc/hatrpc/pkg/idl"
)

// TestGeneratedCodeIsCurrent regenerates gen/ from hatkv.thrift in memory
// (what `go generate` runs through hatgen) and compares it with the
// checked-in files, so an IDL edit without regeneration fails here.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	prog, _, err := idl.Load("hatkv.thrift", nil)
	require.NoError(t, err)
	files, err := codegen.Generate(prog, codegen.WithGoPackage("github.com/hatrpc/hatrpc/internal/hatkv/gen"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		have, err := os.ReadFile(filepath.Join("gen", f.Path))
		require.NoError(t, err, "generated file %s is not checked in", f.Path)
		require.Equal(t, string(f.Content), string(have), "gen/%s is stale: run go generate ./internal/hatkv", f.Path)
	}
}
