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

// readmeSteps returns the commands of the README's "Depending on HatRPC"
// code block, one argv each (continuation lines joined, comments dropped),
// with the checkout path ../hatrpc replaced by root.
func readmeSteps(t *testing.T, root string) [][]string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n### Depending on HatRPC\n")
	require.True(t, ok, "README has no \"Depending on HatRPC\" section")
	_, block, ok := strings.Cut(section, "```sh\n")
	require.True(t, ok, "no sh code block in the section")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok, "unterminated code block")
	var steps [][]string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if f := strings.Fields(line); len(f) > 0 {
			for i := range f {
				f[i] = strings.ReplaceAll(f[i], "../hatrpc", root)
			}
			steps = append(steps, f)
		}
	}
	return steps
}

// TestFreshModule follows the README's "Depending on HatRPC" and the echo
// guide from a new module outside this repository: the guide's IDL, its
// go:generate line (`go tool hatgen`, no --go-package: the import path
// comes from go.mod) and its server and client are written first, then
// the README's commands run exactly as written, in the default
// -mod=readonly mode, and one call is made between server and client.
func TestFreshModule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	root := testenv.RepoRoot(t)
	dir := t.TempDir()
	require.False(t, strings.HasPrefix(dir, root+string(filepath.Separator)), "the module must be outside the checkout")

	steps := readmeSteps(t, root)
	require.Equal(t, []string{"go", "mod", "tidy"}, steps[len(steps)-2], "one go mod tidy, just before the build")
	tidies := 0
	for _, s := range steps {
		if strings.Join(s, " ") == "go mod tidy" {
			tidies++
		}
	}
	require.Equal(t, 1, tidies, "the README runs go mod tidy once")

	// The user's files: the guide's IDL and go:generate line, and its
	// server and client importing the generated package of this module.
	copyFile(t, "echo.thrift", filepath.Join(dir, "echo.thrift"))
	writeFile(t, filepath.Join(dir, "doc.go"),
		"package echosvc\n\n//go:generate go tool hatgen generate -o gen echo.thrift\n")
	for _, prog := range []string{"server", "client"} {
		src, err := os.ReadFile(filepath.Join(prog, "main.go"))
		require.NoError(t, err)
		out := strings.ReplaceAll(string(src), "github.com/hatrpc/hatrpc/examples/echo/gen/echo", "example.com/echosvc/gen/echo")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, prog), 0o755))
		writeFile(t, filepath.Join(dir, prog, "main.go"), out)
	}

	// No go.work applies and no GOFLAGS: the go command's defaults.
	// `go get -tool` asks the proxy about github.com/hatrpc/hatrpc/cmd/hatgen
	// first; proxy.golang.org answers "not found" for an unpublished module
	// and the go command moves on to the replaced one, but some mirrors
	// answer 403, which stops it. The module cache, as a last file://
	// proxy after "|", answers not found as proxy.golang.org would
	// ("direct" is left out: without a network its error wins over not
	// found).
	var proxies []string
	for _, p := range strings.FieldsFunc(strings.TrimSpace(goIn(t, ctx, root, os.Environ(), "env", "GOPROXY")),
		func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" && p != "off" {
			proxies = append(proxies, p)
		}
	}
	cache := strings.TrimSpace(goIn(t, ctx, root, os.Environ(), "env", "GOMODCACHE"))
	proxies = append(proxies, "file://"+filepath.ToSlash(filepath.Join(cache, "cache", "download")))
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOPROXY="+strings.Join(proxies, "|"))
	bin := filepath.Join(dir, "bin")
	for _, s := range steps {
		require.Equal(t, "go", s[0], "the guide runs only the go command")
		if strings.Join(s, " ") == "go build ./..." {
			s = []string{"go", "build", "-o", bin + string(filepath.Separator), "./..."}
		}
		goIn(t, ctx, dir, env, s[1:]...)
	}
	_, err := os.Stat(filepath.Join(dir, "gen", "echo", "echo.go"))
	require.NoError(t, err, "go generate wrote gen/echo/echo.go")
	assert.Equal(t, "hatgen version devel ("+root+")\n", goIn(t, ctx, dir, env, "tool", "hatgen", "--version"))
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(gomod), "\nrequire github.com/hatrpc/hatrpc v0.0.0-00010101000000-000000000000\n")
	assert.Contains(t, string(gomod), "\ntool github.com/hatrpc/hatrpc/cmd/hatgen\n")
	goIn(t, ctx, dir, env, "vet", "./...")

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
