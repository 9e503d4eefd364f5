package echo_test

import (
	"bufio"
	"context"
	"debug/elf"
	"debug/macho"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// buildEnv is build with extra environment (CGO_ENABLED, GOOS).
func buildEnv(t *testing.T, ctx context.Context, dir, pkg string, env ...string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%v go build %s: %s", env, pkg, out)
	return bin
}

// TestPureGoBuild: the example's client and server build without cgo (a
// static binary: no libibverbs, no libc) and for macOS, and the cgo-free
// pair talks over TCP; asking it for shm fails with the typed error's text.
func TestPureGoBuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	const (
		srvPkg = "github.com/hatrpc/hatrpc/examples/echo/server"
		cliPkg = "github.com/hatrpc/hatrpc/examples/echo/client"
	)

	t.Run("darwin", func(t *testing.T) {
		dir := t.TempDir()
		for _, pkg := range []string{srvPkg, cliPkg} {
			bin := buildEnv(t, ctx, dir, pkg, "GOOS=darwin", "GOARCH=arm64")
			f, err := macho.Open(bin)
			require.NoError(t, err, "%s is not a Mach-O binary", pkg)
			assert.Equal(t, macho.CpuArm64, f.Cpu)
			require.NoError(t, f.Close())
		}
	})

	dir := t.TempDir()
	serverBin := buildEnv(t, ctx, dir, srvPkg, "CGO_ENABLED=0")
	clientBin := buildEnv(t, ctx, dir, cliPkg, "CGO_ENABLED=0")
	for _, bin := range []string{serverBin, clientBin} {
		f, err := elf.Open(bin)
		require.NoError(t, err)
		libs, err := f.ImportedLibraries()
		require.NoError(t, err)
		assert.Empty(t, libs, "%s links shared libraries", bin)
		for _, p := range f.Progs {
			assert.NotEqual(t, elf.PT_INTERP, p.Type, "%s asks for a dynamic loader", bin)
		}
		require.NoError(t, f.Close())
		if ldd, err := exec.LookPath("ldd"); err == nil {
			out, _ := exec.CommandContext(ctx, ldd, bin).CombinedOutput() // exits 1 for static binaries
			assert.Contains(t, string(out), "not a dynamic executable")
		}
	}

	t.Run("tcp", func(t *testing.T) { runExample(t, ctx, serverBin, clientBin, "off") })

	t.Run("auto is tcp", func(t *testing.T) {
		addr, stop := startServer(t, ctx, serverBin, "auto")
		defer stop()
		out, err := exec.CommandContext(ctx, clientBin, "-addr", addr, "-msg", "hi", "-rdma", "auto").CombinedOutput()
		require.NoError(t, err, "client: %s", out)
		assert.Contains(t, string(out), "echo: hi\n")
		assert.Contains(t, string(out), "plan echo: transport=tcp polling=busy\n  0-... tcp - busy\n")

		out, err = exec.CommandContext(ctx, clientBin, "-addr", addr, "-rdma", "shm").CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), "client: shm lane setup failed: fastpath: rdma/shm transports are not in this build (it needs cgo on linux); use tcp\n")
	})

	t.Run("server shm refused", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, serverBin, "-addr", "127.0.0.1:0", "-rdma", "shm").CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), `server: WithRDMA("shm"): fastpath: rdma/shm transports are not in this build (it needs cgo on linux); use tcp`+"\n")
	})
}

// startServer starts the example server and returns its address and a stop
// function that ends it with SIGTERM and waits for it.
func startServer(t *testing.T, ctx context.Context, bin, lanes string) (string, func()) {
	t.Helper()
	srv := exec.CommandContext(ctx, bin, "-addr", "127.0.0.1:0", "-rdma", lanes)
	stdout, err := srv.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		t.Fatal("server printed nothing")
	}
	addr, ok := strings.CutPrefix(lines.Text(), "echo server listening on ")
	if !ok {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		t.Fatalf("unexpected first line %q", lines.Text())
	}
	return addr, func() {
		assert.NoError(t, srv.Process.Signal(syscall.SIGTERM))
		for lines.Scan() {
		}
		assert.NoError(t, srv.Wait())
	}
}

// TestClientOnlyDeps: a client of a generated package links no server code
// (the registration is in the <pkg>server subpackage) and no Prometheus,
// with or without cgo: the FLOCK handle's metrics (pkg/flock) are plain
// atomics, exported by pkg/flock/flockmetrics, which only the server links.
func TestClientOnlyDeps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(2*time.Minute))
	defer cancel()
	const mod = "github.com/hatrpc/hatrpc/"
	deps := func(cgo, pkg string) map[string][]string {
		cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		out, err := cmd.Output()
		require.NoError(t, err)
		m := map[string][]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l)
			m[f[0]] = f[1:]
		}
		return m
	}
	for _, cgo := range []string{"0", "1"} {
		t.Run("CGO_ENABLED="+cgo, func(t *testing.T) {
			cli := deps(cgo, mod+"examples/echo/client")
			require.Contains(t, cli, mod+"examples/echo/gen/echo")
			require.Contains(t, cli, mod+"pkg/client")
			var prom []string // hatrpc packages importing Prometheus
			for p, imps := range cli {
				assert.False(t, strings.HasPrefix(p, mod+"pkg/server"), "the client links %s", p)
				assert.NotEqual(t, mod+"examples/echo/gen/echo/echoserver", p)
				for _, i := range imps {
					if strings.HasPrefix(i, "github.com/prometheus/") && strings.HasPrefix(p, mod) {
						prom = append(prom, p)
					}
				}
			}
			assert.Empty(t, prom)
			for p := range cli {
				assert.False(t, strings.HasPrefix(p, "github.com/prometheus/"), "the client links %s", p)
			}
			if cgo == "1" {
				assert.Contains(t, cli, mod+"pkg/flock", "the cgo client has its FLOCK handle")
			}
			srv := deps(cgo, mod+"examples/echo/server")
			assert.Contains(t, srv, mod+"pkg/server")
			assert.Contains(t, srv, mod+"examples/echo/gen/echo/echoserver")
			if cgo == "1" {
				assert.Contains(t, srv, mod+"pkg/flock/flockmetrics", "the server exports the flock_* series")
			}
		})
	}
}
