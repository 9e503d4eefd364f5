package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrProcessOnly is what an external system (another program's server and
// client, see external) answers when asked to serve or call inside this
// process: only the multi-process runner (cmd/atb, cmd/atb-tcp) runs them.
var ErrProcessOnly = errors.New("bench: system runs only as separate processes (cmd/atb, cmd/atb-tcp)")

// ErrExternalTool means a program an external system needs is missing or
// did not build.
var ErrExternalTool = errors.New("bench: external system's program unavailable (run `make deps-bench`)")

// external is a System whose server and client are other programs. The
// runner's server and client roles (ServeUntilEOF, RunClient) hand over to
// it; its Serve and Callers return ErrProcessOnly.
type external interface {
	System
	// serveProcess serves on addr until in reaches EOF and prints
	// "ADDR <addr> pid=<pid>" on out, pid being the process that serves
	// (whose CPU time the runner samples).
	serveProcess(ctx context.Context, addr string, in io.Reader, out io.Writer) error
	runClient(ctx context.Context, spec ClientSpec) (ClientResult, error)
	// describe says what runs, for the report's system column.
	describe() string
}

// IsExternal reports whether name is served and called by another program,
// so that it runs only through the multi-process runner.
func IsExternal(name string) bool {
	s, err := Lookup(name)
	if err != nil {
		return false
	}
	_, ok := s.(external)
	return ok
}

// latencyOnly is a system that measures only 1-caller latency (ucx-sm:
// ucx_perftest has no closed loop of N callers); the driver leaves it out
// of throughput runs.
type latencyOnly interface{ latencyOnly() }

// LatencyOnly reports whether name measures only latency.
func LatencyOnly(name string) bool {
	s, err := Lookup(BaseName(name))
	if err != nil {
		return false
	}
	_, ok := s.(latencyOnly)
	return ok
}

// ApacheCpp is Apache Thrift's C++ library 0.17 (Debian's libthrift-dev),
// the HatRPC paper's "vanilla Thrift": the echo service from the same
// hint-free IDL as the Go Apache systems (idl/atb_plain.thrift, `thrift
// --gen cpp`), framed binary, served by TThreadedServer or
// TNonblockingServer and called by its C++ client, one connection per
// caller (apachecpp/).
type ApacheCpp struct {
	// Server is "threaded" or "nonblocking".
	Server string
}

// Name is "apache-cpp-threaded" or "apache-cpp-nonblocking": the
// "apache" prefix puts it among the baselines atb-tcp's verdicts take the
// best of.
func (a ApacheCpp) Name() string { return "apache-cpp-" + a.Server }

func (a ApacheCpp) describe() string {
	srv := map[string]string{"threaded": "TThreadedServer", "nonblocking": "TNonblockingServer"}[a.Server]
	return "Apache Thrift C++ 0.17 " + srv + ", framed binary, TCP loopback"
}

// Serve returns ErrProcessOnly: the server is a C++ program.
func (a ApacheCpp) Serve(context.Context, string) (Server, error) { return nil, ErrProcessOnly }

// Callers returns ErrProcessOnly: the callers are a C++ program's threads.
func (a ApacheCpp) Callers(context.Context, string, int) ([]Caller, error) {
	return nil, ErrProcessOnly
}

func (a ApacheCpp) serveProcess(ctx context.Context, addr string, in io.Reader, out io.Writer) error {
	dir, err := apacheCppPrograms(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "atb-apache-cpp-server"), "-server", a.Server, "-addr", addr)
	// The server exits when this stdin (the runner's pipe) reaches EOF.
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
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("%w: %s said %q: %v", ErrChild, a.Name(), line, err)
	}
	if _, err := fmt.Fprintf(out, "ADDR %s pid=%d\n", got, cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	return cmd.Wait()
}

func (a ApacheCpp) runClient(ctx context.Context, spec ClientSpec) (ClientResult, error) {
	dir, err := apacheCppPrograms(ctx)
	if err != nil {
		return ClientResult{}, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "atb-apache-cpp-client"), apacheCppClientArgs(spec)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return ClientResult{}, fmt.Errorf("%w: %s client: %v", ErrChild, a.Name(), err)
	}
	return decodeExternalResult(spec, out)
}

// apacheCppClientArgs is the C++ client's command line for spec.
func apacheCppClientArgs(spec ClientSpec) []string {
	args := []string{"-addr", spec.Addr, "-size", strconv.Itoa(spec.Size)}
	if spec.Callers == 0 {
		return append(args, "-warmup", strconv.Itoa(spec.Warmup), "-warmup-ns", strconv.FormatInt(int64(spec.WarmupFor), 10),
			"-calls", strconv.Itoa(spec.Calls))
	}
	args = append(args, "-callers", strconv.Itoa(spec.Callers), "-duration-ns", strconv.FormatInt(int64(spec.Duration), 10))
	if spec.ServerPID > 0 {
		args = append(args, "-server-pid", strconv.Itoa(spec.ServerPID))
	}
	return args
}

// decodeExternalResult reads a program's one-line JSON answer (a
// ClientResult without its spec) and checks it answers spec's question.
func decodeExternalResult(spec ClientSpec, out []byte) (ClientResult, error) {
	var res ClientResult
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("%w: client output %q: %v", ErrChild, out, err)
	}
	res.Spec = spec
	switch {
	case spec.Callers == 0 && (res.Latency == nil || res.Latency.Calls < 1):
		return res, fmt.Errorf("%w: client output %q: no latency result", ErrChild, out)
	case spec.Callers > 0 && (res.Throughput == nil || res.Throughput.Callers != spec.Callers):
		return res, fmt.Errorf("%w: client output %q: no throughput result for %d callers", ErrChild, out, spec.Callers)
	}
	return res, nil
}

// The C++ sources and the IDL travel inside the runner binary, so a run
// builds exactly the sources it was built from (into a cache directory
// named by their hash), wherever it runs.
//
//go:embed apachecpp/Makefile apachecpp/*.cpp apachecpp/*.h idl/atb_plain.thrift
var apacheCppSrc embed.FS

var apacheCpp struct {
	once sync.Once
	dir  string
	err  error
}

// apacheCppPrograms returns the directory holding atb-apache-cpp-server
// and -client, building them with apachecpp/Makefile (g++, Debian's thrift
// compiler and libthrift-dev; nothing is downloaded) on first use.
func apacheCppPrograms(ctx context.Context) (string, error) {
	apacheCpp.once.Do(func() { apacheCpp.dir, apacheCpp.err = buildApacheCpp(ctx) })
	return apacheCpp.dir, apacheCpp.err
}

// PrepareExternal builds or checks the programs of the named external
// systems now and makes a few calls through each, server and client in
// processes of their own as in a sweep (`make deps-bench`): a missing tool
// or a broken build fails here, with what to install, and not in a sweep's
// first measurement. What it prints is a smoke run, not a measurement.
func PrepareExternal(ctx context.Context, systems []string, log io.Writer) error {
	for _, name := range systems {
		s, err := Lookup(name)
		if err != nil {
			return err
		}
		switch s := s.(type) {
		case ApacheCpp:
			_, err = apacheCppPrograms(ctx)
		case UCX:
			_, err = ucxPerftest()
		case GRPCStream:
			_, err = grpcStreamProgram(ctx)
		default:
			err = fmt.Errorf("bench: %s is not an external system", s.Name())
		}
		if err != nil {
			return err
		}
		srv, err := StartServerProcess(ctx, name, "")
		if err != nil {
			return err
		}
		spec := ClientSpec{System: name, Addr: srv.Addr, Size: 64, Warmup: 10, Calls: 100}
		if IsStream(name) {
			spec.Stream = &StreamSpec{Size: 64, Count: 100, Warmup: 10}
		}
		res, err := RunClientProcess(ctx, spec, "")
		if serr := srv.Stop(); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		if res.Stream != nil {
			fmt.Fprintf(log, "%s: ok (a stream of 100 messages of 64 B in %v; a smoke run, not a measurement)\n", name, res.Stream.Elapsed)
			continue
		}
		fmt.Fprintf(log, "%s: ok (100 calls of 64 B, p50 %v; a smoke run, not a measurement)\n", name, res.Latency.P50)
	}
	return nil
}

func buildApacheCpp(ctx context.Context) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(apacheCppSrc, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := apacheCppSrc.ReadFile(p)
		fmt.Fprintf(h, "%s %d\n", p, len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrExternalTool, err)
	}
	root := filepath.Join(cache, "hatrpc-bench")
	dir := filepath.Join(root, "apache-cpp-"+hex.EncodeToString(h.Sum(nil))[:16])
	if apacheCppBuilt(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(filepath.Join(tmp, "src"), apacheCppSrc); err != nil {
		return "", err
	}
	out := filepath.Join(tmp, "out")
	cmd := exec.CommandContext(ctx, "make", "-s", "-C", filepath.Join(tmp, "src", "apachecpp"), "OUT="+out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: building apache-cpp (needs g++, thrift-compiler, libthrift-dev, libboost-dev, libevent-dev): %v\n%s",
			ErrExternalTool, err, tail(msg, 2000))
	}
	// Another process may have finished the same build meanwhile: its
	// directory is as good as this one.
	if err := os.Rename(out, dir); err != nil && !apacheCppBuilt(dir) {
		return "", err
	}
	return dir, nil
}

func apacheCppBuilt(dir string) bool {
	for _, p := range []string{"atb-apache-cpp-server", "atb-apache-cpp-client"} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func init() {
	Register(ApacheCpp{Server: "threaded"})
	Register(ApacheCpp{Server: "nonblocking"})
}
