package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// UCX is UCX's own ping-pong, Debian's ucx_perftest (ucx-utils, UCX 1.13),
// over its shared-memory transports (UCX_TLS=sm): the one-host latency
// the engine is held to (issue 47). ucx_perftest rather than a program of
// our own against libucx: the goal is stated in its figures, and it is
// UCX's tuned loop, so nothing of ours sits between UCX and the number.
// It has no closed loop of N callers (its _bw tests stream one way), so
// the system is latency only.
//
// ucx_perftest reports one-way latency (half the round trip); the results
// here are doubled into round trips like every other system's. Its
// percentiles are over the last 2048 iterations only (TIMING_QUEUE_SIZE
// in UCX's libperf) and one rank per run, so a measurement is three runs
// (-R 50, 99, 99.9) of spec.Calls iterations each; the mean is the first
// run's average over all its iterations.
type UCX struct {
	// Test is ucx_perftest's -t: tag_lat (UCP tag matching) or ucp_am_lat
	// (UCP active messages).
	Test string
}

// Name is "ucx-sm" (tag_lat) or "ucx-sm-am" (ucp_am_lat).
func (u UCX) Name() string {
	if u.Test == "ucp_am_lat" {
		return "ucx-sm-am"
	}
	return "ucx-sm"
}

func (u UCX) describe() string {
	return "ucx_perftest -t " + u.Test + ", UCX_TLS=sm, one way ×2"
}

func (UCX) latencyOnly() {}

// isUCX reports whether name is a UCX system of this build (a baseline
// build's is the same program, so never a comparison of interest).
func isUCX(name string) bool {
	s, err := Lookup(name)
	if err != nil {
		return false
	}
	_, ok := s.(UCX)
	return ok
}

// Serve returns ErrProcessOnly: the server is ucx_perftest.
func (UCX) Serve(context.Context, string) (Server, error) { return nil, ErrProcessOnly }

// Callers returns ErrProcessOnly: the client is ucx_perftest.
func (UCX) Callers(context.Context, string, int) ([]Caller, error) { return nil, ErrProcessOnly }

// ucxEnv is the environment both ends run in: shared-memory transports
// only, whatever UCX_TLS the caller has.
func ucxEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UCX_TLS=") {
			env = append(env, kv)
		}
	}
	return append(env, "UCX_TLS=sm")
}

func ucxPerftest() (string, error) {
	p, err := exec.LookPath("ucx_perftest")
	if err != nil {
		return "", fmt.Errorf("%w: ucx_perftest (Debian ucx-utils): %v", ErrExternalTool, err)
	}
	return p, nil
}

// serveProcess keeps a ucx_perftest server listening on addr's port: one
// serves one test and exits, so a new one starts as each ends, until in
// reaches EOF.
func (u UCX) serveProcess(ctx context.Context, addr string, in io.Reader, out io.Writer) error {
	bin, err := ucxPerftest()
	if err != nil {
		return err
	}
	// ucx_perftest listens on all addresses of a port it is given: take a
	// free one.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()
	if _, err := fmt.Fprintf(out, "ADDR %s pid=%d\n", net.JoinHostPort(host, port), os.Getpid()); err != nil {
		return err
	}
	for ctx.Err() == nil {
		cmd := exec.CommandContext(ctx, bin, "-p", port)
		cmd.Env = ucxEnv()
		var msg bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &msg
		if err := cmd.Run(); err != nil && ctx.Err() == nil {
			// A client that failed mid-test fails the server too; the
			// client reports it, and the next client gets a fresh server.
			fmt.Fprintf(os.Stderr, "bench: %s server: %v: %s\n", u.Name(), err, tail(msg.Bytes(), 500))
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// ucxRanks are the percentile ranks of a measurement's runs: p50, p99,
// p99.9.
var ucxRanks = []string{"50", "99", "99.9"}

func (u UCX) runClient(ctx context.Context, spec ClientSpec) (ClientResult, error) {
	if spec.Callers != 0 {
		return ClientResult{}, fmt.Errorf("bench: %s measures 1-caller latency only, not %d callers", u.Name(), spec.Callers)
	}
	bin, err := ucxPerftest()
	if err != nil {
		return ClientResult{}, err
	}
	host, port, err := net.SplitHostPort(spec.Addr)
	if err != nil {
		return ClientResult{}, err
	}
	// Warm-up: ucx_perftest's -w counts iterations; WarmupFor is turned
	// into at least as many as fit in it at a microsecond each.
	warm := max(spec.Warmup, int(spec.WarmupFor/time.Microsecond))
	var lat LatencyResult
	for i, rank := range ucxRanks {
		args := []string{host, "-p", port, "-t", u.Test, "-s", strconv.Itoa(max(spec.Size, 1)),
			"-n", strconv.Itoa(spec.Calls), "-w", strconv.Itoa(warm), "-f", "-v", "-R", rank}
		out, err := ucxRun(ctx, bin, args)
		if err != nil {
			return ClientResult{}, fmt.Errorf("%w: %s client: %v", ErrChild, u.Name(), err)
		}
		r, err := parseUCXPerftest(out)
		if err != nil {
			return ClientResult{}, err
		}
		switch i {
		case 0:
			lat = LatencyResult{Calls: r.iters, P50: r.percentile, Mean: r.avg}
		case 1:
			lat.P99 = r.percentile
		case 2:
			lat.P999 = r.percentile
		}
	}
	return ClientResult{Spec: spec, Latency: &lat}, nil
}

// ucxRun runs a ucx_perftest client, again while the server it connects to
// is not listening yet (the previous test's server is still exiting).
func ucxRun(ctx context.Context, bin string, args []string) ([]byte, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = ucxEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil {
			return stdout.Bytes(), nil
		}
		// UCX logs its errors on stdout.
		msg := append(stderr.Bytes(), stdout.Bytes()...)
		if !bytes.Contains(msg, []byte("Connection refused")) || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("%v: %s", err, tail(msg, 500))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ucxResult is one ucx_perftest run, latencies turned into round trips.
type ucxResult struct {
	iters           int64
	percentile, avg time.Duration
}

// errUCXOutput means ucx_perftest's output was not the CSV `-f -v` prints.
var errUCXOutput = errors.New("bench: unexpected ucx_perftest output")

// parseUCXPerftest reads the final CSV line of `ucx_perftest -f -v`:
//
//	iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
//	20000,0.585,0.598,0.598,102.01,102.01,1671341,1671341
//
// latencies in µs, one way.
func parseUCXPerftest(out []byte) (ucxResult, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := 0; i+1 < len(lines); i++ {
		hdr := strings.Split(strings.TrimSpace(lines[i]), ",")
		if len(hdr) < 3 || hdr[0] != "iterations" || !strings.HasSuffix(hdr[1], "_percentile_lat") || hdr[2] != "avg_lat" {
			continue
		}
		f := strings.Split(strings.TrimSpace(lines[i+1]), ",")
		if len(f) != len(hdr) {
			break
		}
		n, err1 := strconv.ParseInt(f[0], 10, 64)
		p, err2 := strconv.ParseFloat(f[1], 64)
		a, err3 := strconv.ParseFloat(f[2], 64)
		// A minute one way is no latency measurement (and larger ones, or
		// NaN, would not fit a Duration).
		sane := func(us float64) bool { return us > 0 && us < 60e6 }
		if err := errors.Join(err1, err2, err3); err != nil || n < 1 || !sane(p) || !sane(a) {
			break
		}
		roundTrip := func(us float64) time.Duration { return time.Duration(2 * us * 1e3) }
		return ucxResult{iters: n, percentile: roundTrip(p), avg: roundTrip(a)}, nil
	}
	return ucxResult{}, fmt.Errorf("%w: %q", errUCXOutput, tail(out, 500))
}

func init() {
	Register(UCX{Test: "tag_lat"})
	Register(UCX{Test: "ucp_am_lat"})
}
