package codegen_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/codegen"
	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// corpusDir holds the real-world IDL every release must accept.
func corpusDir(t testing.TB) string { return testenv.SharedIDLDir(t) }

func corpusFiles(t testing.TB) []string {
	var files []string
	err := filepath.WalkDir(corpusDir(t), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".thrift") {
			files = append(files, p)
		}
		return nil
	})
	require.NoError(t, err, "the IDL corpus must be present")
	sort.Strings(files)
	require.NotEmpty(t, files)
	return files
}

// TestCorpusGeneratesAndCompiles generates every corpus file (with its
// includes) into its own directory inside the module and vets the result.
func TestCorpusGeneratesAndCompiles(t *testing.T) {
	files := corpusFiles(t)
	tmp, err := os.MkdirTemp("testdata", "tmp-corpus-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(tmp) })
	for i, f := range files {
		prog, diags, err := idl.Load(f, nil)
		require.NoError(t, err, f)
		require.Empty(t, diags.Errors, f)
		sub := filepath.ToSlash(filepath.Join(tmp, fmt.Sprintf("c%d", i)))
		out, err := codegen.Generate(prog, codegen.WithGoPackage(modulePath+"/"+selfPath+"/"+sub))
		require.NoError(t, err, f)
		require.NotEmpty(t, out, f)
		writeFiles(t, sub, out)
	}
	vetPackages(t, tmp)
}
