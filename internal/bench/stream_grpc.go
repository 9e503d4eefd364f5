package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// GRPCStream is gRPC-Go (v1.83) server streaming, the program in
// grpcstream/: a Go module of its own, so the framework's users never
// download gRPC. No protoc: the service is declared by hand and messages
// are raw bytes through a codec of its own (gRPC's fastest case, nothing
// to marshal; the client receives into one reused buffer). gRPC's default
// transport settings (windows, buffers), one connection.
type GRPCStream struct{}

// Name is "grpc-stream".
func (GRPCStream) Name() string { return "grpc-stream" }

func (GRPCStream) describe() string {
	return "gRPC-Go 1.83 server streaming, raw-bytes codec, TCP loopback"
}

// Serve returns ErrProcessOnly: the server is another program.
func (GRPCStream) Serve(context.Context, string) (Server, error) { return nil, ErrProcessOnly }

// Callers returns ErrProcessOnly.
func (GRPCStream) Callers(context.Context, string, int) ([]Caller, error) {
	return nil, ErrProcessOnly
}

func (g GRPCStream) serveProcess(ctx context.Context, addr string, in io.Reader, out io.Writer) error {
	bin, err := grpcStreamProgram(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "-role", "server", "-addr", addr)
	// The program exits when this stdin (the runner's pipe) reaches EOF.
	cmd.Stdin, cmd.Stderr = in, os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	got, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	if err == nil && ok {
		_, err = fmt.Fprintf(out, "ADDR %s pid=%d\n", got, cmd.Process.Pid)
	} else {
		err = fmt.Errorf("%w: %s said %q: %v", ErrChild, g.Name(), line, err)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	return cmd.Wait()
}

func (g GRPCStream) runClient(ctx context.Context, spec ClientSpec) (ClientResult, error) {
	if spec.Stream == nil {
		return ClientResult{}, fmt.Errorf("%w: %s measures streams only (use -stream-sizes)", ErrNotStream, g.Name())
	}
	if err := spec.Stream.validate(); err != nil {
		return ClientResult{}, err
	}
	bin, err := grpcStreamProgram(ctx)
	if err != nil {
		return ClientResult{}, err
	}
	cmd := exec.CommandContext(ctx, bin, grpcStreamClientArgs(spec)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return ClientResult{}, fmt.Errorf("%w: %s client: %v", ErrChild, g.Name(), err)
	}
	return decodeStreamResult(spec, out)
}

// grpcStreamClientArgs is the program's command line for spec.
func grpcStreamClientArgs(spec ClientSpec) []string {
	return []string{"-role", "client", "-addr", spec.Addr,
		"-size", strconv.Itoa(spec.Stream.Size),
		"-count", strconv.FormatInt(spec.Stream.Count, 10),
		"-warmup", strconv.FormatInt(spec.Stream.Warmup, 10)}
}

// decodeStreamResult reads a stream program's one-line JSON answer and
// checks it answers spec: every message of the stream arrived.
func decodeStreamResult(spec ClientSpec, out []byte) (ClientResult, error) {
	var res ClientResult
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("%w: client output %q: %v", ErrChild, out, err)
	}
	res.Spec = spec
	want := spec.Stream
	if s := res.Stream; s == nil || s.Messages != want.Count || s.Bytes != want.Count*int64(want.Size) || s.Elapsed <= 0 {
		return res, fmt.Errorf("%w: client output %q: not a stream of %d messages of %d bytes", ErrChild, out, want.Count, want.Size)
	}
	return res, nil
}

// grpcStreamSrc is the program's module directory, found from this
// file's path: the program is built from the source tree (a nested
// module cannot be embedded), so the runner must run from a checkout.
func grpcStreamSrc() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "grpcstream")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); !ok || err != nil {
		return "", fmt.Errorf("%w: grpc-stream is built from internal/bench/grpcstream of a checkout; not found at %s", ErrExternalTool, dir)
	}
	return dir, nil
}

var grpcStream struct {
	once sync.Once
	bin  string
	err  error
}

// grpcStreamProgram builds the program on first use into
// ~/.cache/hatrpc-bench/grpc-stream-<hash of its sources> from the module
// cache only (GOPROXY=off: nothing downloads at run time; `make
// deps-bench` fills the cache).
func grpcStreamProgram(ctx context.Context) (string, error) {
	grpcStream.once.Do(func() { grpcStream.bin, grpcStream.err = buildGRPCStream(ctx) })
	return grpcStream.bin, grpcStream.err
}

func buildGRPCStream(ctx context.Context) (string, error) {
	src, err := grpcStreamSrc()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	names, err := filepath.Glob(filepath.Join(src, "*"))
	if err != nil {
		return "", err
	}
	for _, p := range names {
		if strings.HasSuffix(p, "_test.go") || !(strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".mod") || strings.HasSuffix(p, ".sum")) {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(p), len(b))
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrExternalTool, err)
	}
	dir := filepath.Join(cache, "hatrpc-bench", "grpc-stream-"+hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(dir, "grpc-stream")
	if st, err := os.Stat(bin); err == nil && st.Mode().Perm()&0o111 != 0 {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built under a temporary name and renamed: a concurrent build's
	// result is as good as this one.
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("%w: building grpc-stream (its modules come from the module cache; `make deps-bench` downloads them): %v\n%s",
			ErrExternalTool, err, tail(msg, 2000))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

func init() { Register(GRPCStream{}) }
