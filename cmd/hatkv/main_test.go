package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// childArgsEnv makes the test binary act as the hatkv command (with these
// unit-separator (0x1f) separated arguments), so tests can signal and kill a real process.
const childArgsEnv = "HATKV_CLI_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsEnv); args != "" {
		// The parent holds our stdin; when it dies (e.g. on a test
		// timeout) we go too, so no server outlives the test.
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			os.Exit(3)
		}()
		os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	if pid := os.Getenv(probeProcEnv); pid != "" {
		os.Exit(probeProc(pid))
	}
	goleak.VerifyTestMain(m)
}

// syncBuffer is written by a command running in another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runCmd runs the hatkv command line in-process.
func runCmd(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd, out := testCmd(stdin, args...)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// testCmd is the root command with args, reading stdin (nil: nothing) and
// writing both its outputs to out.
func testCmd(stdin io.Reader, args ...string) (_ *cobra.Command, out *syncBuffer) {
	cmd := newRootCmd()
	out = &syncBuffer{}
	cmd.SetOut(out)
	cmd.SetErr(out)
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	cmd.SetIn(stdin)
	cmd.SetArgs(args)
	return cmd, out
}

var listeningRE = regexp.MustCompile(`listening on (\S+)`)

// serveInProcess runs `hatkv serve` on 127.0.0.1:0 in a temp dir and
// returns its address; cleanup cancels it (graceful shutdown) and checks
// it stopped cleanly.
func serveInProcess(t *testing.T, extra ...string) string {
	addr, _ := serveInProcessOutput(t, extra...)
	return addr
}

func serveInProcessOutput(t *testing.T, extra ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newRootCmd()
	var out syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"serve", "--db", t.TempDir(), "--listen", "127.0.0.1:0", "--sync", "nosync"}, extra...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
			require.Contains(t, out.String(), "hatkv: stopped")
		case <-time.After(testenv.HangGuard(30 * time.Second)):
			t.Error("serve did not stop")
		}
	})
	deadline := time.Now().Add(testenv.HangGuard(30 * time.Second))
	for time.Now().Before(deadline) {
		if m := listeningRE.FindStringSubmatch(out.String()); m != nil {
			return m[1], &out
		}
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("serve exited: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("serve did not start:\n%s", out.String())
	return "", nil
}

func TestGCTarget(t *testing.T) {
	tests := []struct {
		gogc string
		pct  int
		set  bool
	}{
		{"", defaultGCPercent, true},
		{"100", 0, false},
		{"off", 0, false},
	}
	for _, tc := range tests {
		t.Run("GOGC="+tc.gogc, func(t *testing.T) {
			pct, set := gcTarget(func(k string) string {
				require.Equal(t, "GOGC", k)
				return tc.gogc
			})
			require.Equal(t, tc.set, set)
			require.Equal(t, tc.pct, pct)
		})
	}
}
