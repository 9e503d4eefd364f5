package echo_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
)

// goIn runs the go command in dir with env under ctx.
func goIn(t *testing.T, ctx context.Context, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// TestFreshModule follows the README's "Depending on HatRPC" and the echo
// guide from a new module outside this repository: go mod init, a replace
// directive pointing at this checkout plus hatgen as a tool, go mod tidy,
// go generate (`go tool hatgen`, no --go-package: the import path comes
// from go.mod), the guide's server and client, and one call between them.
func TestFreshModule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := testenv.RepoRoot(t)
	dir := t.TempDir()
	require.False(t, strings.HasPrefix(dir, root+string(filepath.Separator)), "the module must be outside the checkout")

	// GOFLAGS=-mod=mod lets tidy settle go.mod; modules come from the
	// module cache (or GOPROXY as configured). No go.work applies.
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	goIn(t, ctx, dir, env, "mod", "init", "example.com/echosvc")
	goIn(t, ctx, dir, env, "mod", "edit", "-replace", "github.com/hatrpc/hatrpc="+root,
		"-require", "github.com/hatrpc/hatrpc@v0.0.0-00010101000000-000000000000",
		"-tool", "github.com/hatrpc/hatrpc/cmd/hatgen")

	// Step 1 and 2 of the guide: the IDL and the go:generate line.
	copyFile(t, "echo.thrift", filepath.Join(dir, "echo.thrift"))
	writeFile(t, filepath.Join(dir, "doc.go"),
		"package echosvc\n\n//go:generate go tool hatgen generate -o gen echo.thrift\n")
	goIn(t, ctx, dir, env, "mod", "tidy")
	assert.Equal(t, "hatgen version devel ("+root+")\n", goIn(t, ctx, dir, env, "tool", "hatgen", "--version"))
	goIn(t, ctx, dir, env, "generate", "./...")
	_, err := os.Stat(filepath.Join(dir, "gen", "echo", "echo.go"))
	require.NoError(t, err, "go generate wrote gen/echo/echo.go")

	// Steps 3 and 4: the guide's server and client, importing the
	// generated package from this module.
	for _, prog := range []string{"server", "client"} {
		src, err := os.ReadFile(filepath.Join(prog, "main.go"))
		require.NoError(t, err)
		out := strings.ReplaceAll(string(src), "github.com/hatrpc/hatrpc/examples/echo/gen/echo", "example.com/echosvc/gen/echo")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, prog), 0o755))
		writeFile(t, filepath.Join(dir, prog, "main.go"), out)
	}
	goIn(t, ctx, dir, env, "mod", "tidy")
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(gomod), "\nrequire github.com/hatrpc/hatrpc v0.0.0-00010101000000-000000000000\n")
	assert.Contains(t, string(gomod), "\ntool github.com/hatrpc/hatrpc/cmd/hatgen\n")

	// go.mod and go.sum are complete now: the default -mod=readonly builds.
	roEnv := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	bin := filepath.Join(dir, "bin")
	goIn(t, ctx, dir, roEnv, "build", "-o", bin+string(filepath.Separator), "./...")
	goIn(t, ctx, dir, roEnv, "vet", "./...")

	// Step 5: run them; one call (over TCP) succeeds.
	srv := exec.CommandContext(ctx, filepath.Join(bin, "server"), "-addr", "127.0.0.1:0", "-rdma", "off")
	stdout, err := srv.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "server printed nothing")
	addr, ok := strings.CutPrefix(lines.Text(), "echo server listening on ")
	require.True(t, ok, "unexpected first line %q", lines.Text())

	out, err := exec.CommandContext(ctx, filepath.Join(bin, "client"), "-addr", addr, "-msg", "from a fresh module", "-rdma", "off").CombinedOutput()
	require.NoError(t, err, "client: %s", out)
	assert.Contains(t, string(out), "echo: from a fresh module\n")
	assert.Contains(t, string(out), "empty message refused: nothing to echo\n")

	require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
	require.True(t, lines.Scan(), "server exited without its goodbye")
	assert.Equal(t, "echo server stopped", lines.Text())
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	writeFile(t, to, string(b))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}
