package interop_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestGeneratedCodeUpToDate regenerates every checked-in generated tree the
// interop tests, benchmarks and example rely on and compares it byte for
// byte, so the tests never silently run against stale generator output.
func TestGeneratedCodeUpToDate(t *testing.T) {
	root := repoRoot(t)
	apacheTest := filepath.Join(testenv.SharedIDLDir(t), "apache", "thrift", "test")
	tests := []struct {
		name    string
		dir     string // checked-in output directory, relative to root
		genPkg  string // the package whose go:generate line writes dir
		command func(out string) []string
	}{
		{"hatgen interop", "test/gen", "test/gen", func(out string) []string {
			return []string{"go", "run", "./cmd/hatgen", "generate", "-o", out,
				"--go-package", "github.com/hatrpc/hatrpc/test/gen", "test/testdata/interop_hinted.thrift"}
		}},
		{"hatgen atb", "internal/bench/gen", "internal/bench/gen", func(out string) []string {
			return []string{"go", "run", "./cmd/hatgen", "generate", "-o", out,
				"--go-package", "github.com/hatrpc/hatrpc/internal/bench/gen", "internal/bench/idl/atb.thrift"}
		}},
		{"hatgen atb stream", "internal/bench/gen", "internal/bench/gen", func(out string) []string {
			return []string{"go", "run", "./cmd/hatgen", "generate", "-o", out,
				"--go-package", "github.com/hatrpc/hatrpc/internal/bench/gen", "internal/bench/idl/atbstream.thrift"}
		}},
		{"hatgen echo example", "examples/echo/gen", "examples/echo", func(out string) []string {
			return []string{"go", "run", "./cmd/hatgen", "generate", "-o", out,
				"--go-package", "github.com/hatrpc/hatrpc/examples/echo/gen", "examples/echo/echo.thrift"}
		}},
		{"hatgen stream example", "examples/stream/gen", "examples/stream", func(out string) []string {
			return []string{"go", "run", "./cmd/hatgen", "generate", "-o", out,
				"--go-package", "github.com/hatrpc/hatrpc/examples/stream/gen", "examples/stream/logs.thrift"}
		}},
		{"hatgen crosstest", "test/crosstest/gen", "test/crosstest/gen", func(out string) []string {
			return []string{"go", "run", "./cmd/hatgen", "generate", "-o", out,
				"--go-package", "github.com/hatrpc/hatrpc/test/crosstest/gen", filepath.Join(apacheTest, "ThriftTest.thrift")}
		}},
		{"apache crosstest", "test/crosstest/apachegen", "test/crosstest/apachegen", func(out string) []string {
			// As the go:generate line: Debian's compiler reads the pre-uuid
			// IDL, less the line Apache's Go generator cannot map.
			return []string{"sh", "-c", "grep -v 'list.*map.*list.*map' " + filepath.Join(apacheTest, "v0.16", "ThriftTest.thrift") + " > " + out + "/ThriftTest.thrift && " +
				"thrift --gen go:package_prefix=github.com/hatrpc/hatrpc/test/crosstest/apachegen/,skip_remote -out " + out + " " + out + "/ThriftTest.thrift && rm " + out + "/ThriftTest.thrift"}
		}},
		{"apache interop", "test/apachegen", "test/apachegen", func(out string) []string {
			return []string{"thrift", "--gen", "go:package_prefix=github.com/hatrpc/hatrpc/test/apachegen/,skip_remote",
				"-out", out, "test/testdata/interop.thrift"}
		}},
		{"apache atb", "internal/bench/apachegen", "internal/bench/apachegen", func(out string) []string {
			return []string{"thrift", "--gen", "go:package_prefix=github.com/hatrpc/hatrpc/internal/bench/apachegen/,skip_remote",
				"-out", out, "internal/bench/idl/atb_plain.thrift"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out := t.TempDir()
			args := tt.command(out)
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Dir = root
			b, err := cmd.CombinedOutput()
			require.NoError(t, err, "%v: %s", args, b)
			// Apache's output is gofmt'ed by the go:generate line after it.
			b, err = exec.CommandContext(ctx, "gofmt", "-w", out).CombinedOutput()
			require.NoError(t, err, "gofmt: %s", b)

			fresh := goFiles(t, out)
			require.NotEmpty(t, fresh)
			checked := goFiles(t, filepath.Join(root, tt.dir))
			for rel, want := range fresh {
				got, ok := checked[rel]
				if assert.True(t, ok, "%s/%s is missing; run go generate ./%s", tt.dir, rel, tt.genPkg) {
					assert.True(t, got == want, "%s/%s is stale; run go generate ./%s", tt.dir, rel, tt.genPkg)
				}
			}
		})
	}
}

// goFiles maps the generated .go files under dir (doc.go excluded: it is
// hand-written and holds the go:generate line) to their contents.
func goFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".go" || p == filepath.Join(dir, "doc.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[rel] = string(b)
		return err
	})
	require.NoError(t, err)
	return files
}
