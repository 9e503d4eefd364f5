// Command hatkv is HatKV, the key-value server of the HatRPC paper (§4.4):
// LMDB behind a HatRPC service whose IDL hints also configure the store.
//
//	hatkv serve [--db DIR] [--listen ADDR] [--debug-addr ADDR]
//	hatkv put KEY field=value...      (or fields from stdin)
//	hatkv get KEY [FIELD...]
//	hatkv del KEY
//	hatkv scan START [--count N]
//	hatkv stats
//	hatkv bench -P workloada [-p key=value]... [--threads N] [--phase load|run|both]
//
// Only the TCP transport exists today; --transport rdma|shm is refused.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
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
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newServeCmd(), newGetCmd(), newPutCmd(), newDelCmd(), newScanCmd(), newStatsCmd(), newBenchCmd())
	return root
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
		return "store full: " + full.Message
	}
	return err.Error()
}

func outf(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
