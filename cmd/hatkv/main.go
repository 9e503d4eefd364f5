// Command hatkv is HatKV, the key-value server of the HatRPC paper (§4.4):
// LMDB behind a HatRPC service whose IDL hints also configure the store.
//
//	hatkv serve [--db DIR] [--listen ADDR] [--debug-addr ADDR] [--tls-cert F --tls-key F] [--token T]
//	hatkv put KEY field=value...      (or fields from stdin)
//	hatkv get KEY [FIELD...]
//	hatkv del KEY
//	hatkv scan START [--count N]
//	hatkv scan FROM TO | hatkv scan --all   (streamed, no count limit)
//	hatkv stats
//	hatkv bench -P workloada [-p key=value]... [--threads N] [--phase load|run|both]
//	hatkv check [--db DIR]            (every page and record, offline)
//	hatkv backup TARGET [--db DIR]    (compacted, verified copy; while serving too)
//	hatkv completion bash|zsh|fish|powershell
//	hatkv --version
//
// --transport auto|tcp|shm|rdma picks the transport (auto: TCP plus shm or
// RDMA lanes where the server grants them). --addrs a,b,c (instead of
// --addr) spreads the keys over several servers by consistent hashing. Unless GOGC is set, hatkv runs
// the Go collector at a 400 % target (see gcTarget).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

func main() {
	if pct, ok := gcTarget(os.Getenv); ok {
		debug.SetGCPercent(pct)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// defaultGCPercent is hatkv's collector target when GOGC is not set. The
// records live in LMDB's memory map, outside the Go heap, so the heap is a
// few MB of request and reply buffers: at Go's default of 100 % a loaded
// server collected about 30 times a second, 12-19 % of its CPU. At 400 %
// the heap stays in the tens of MB.
const defaultGCPercent = 400

// gcTarget is the GC percentage to set, and false when GOGC (any value,
// "off" included) already says what the user wants.
func gcTarget(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return defaultGCPercent, true
}

// run executes the command line and returns the exit status; SIGINT and
// SIGTERM cancel the command's context (serve shuts down gracefully).
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		msg := describe(err)
		if !strings.HasPrefix(msg, "hatkv: ") {
			msg = "hatkv: " + msg
		}
		fmt.Fprintln(stderr, msg)
		return 1
	}
	return 0
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "hatkv",
		Short:         "HatKV: an LMDB key-value store served over HatRPC",
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("hatkv {{.Version}}\n")
	root.AddCommand(newServeCmd(), newGetCmd(), newPutCmd(), newDelCmd(), newScanCmd(), newStatsCmd(), newBenchCmd(),
		newCheckCmd(), newBackupCmd())
	return root
}

// version is the module version and VCS revision the binary was built
// from (as `go version -m` shows them), and the liblmdb it runs on.
func version() string {
	v, rev, dirty := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev
		if dirty {
			v += "+dirty"
		}
	}
	return fmt.Sprintf("%s (%s, %s)", v, runtime.Version(), lmdb.Version())
}

// describe renders the IDL's declared exceptions by their message rather
// than their Go struct dump.
func describe(err error) string {
	var (
		bad  *hatkv.InvalidArgument
		nf   *hatkv.NotFound
		full *hatkv.StoreFull
	)
	switch {
	case errors.As(err, &bad):
		return "invalid argument: " + bad.Message
	case errors.As(err, &nf):
		return nf.Message
	case errors.As(err, &full):
		// Our servers' messages already begin so; another server's may not.
		if strings.HasPrefix(full.Message, "store is full") {
			return full.Message
		}
		return "store full: " + full.Message
	}
	return err.Error()
}

func outf(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
