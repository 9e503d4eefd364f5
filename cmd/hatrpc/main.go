// Command hatrpc calls any Thrift server from the command line, with the
// IDL read at run time (pkg/generic): the grpcurl of Thrift.
//
//	hatrpc list FILE.thrift                          services, functions and types
//	hatrpc describe FILE.thrift [Service[.fn]|Type]  signatures and declarations
//	hatrpc call --idl FILE.thrift ADDR Service.fn '{"arg": value}'
//	hatrpc rdma-info [--addr ADDR]                   RDMA devices, GIDs, limits, and the choice for ADDR
//
// call finds a plain Thrift server's framing and protocol by itself and
// upgrades to HatRPC framing (and the shm/RDMA fast path, --rdma) when the
// server is a HatRPC one; --framed, --unframed, --protocol, --theader and
// --multiplexed fix the stack instead. Arguments and results are JSON as
// docs/generic.md maps them. Exit status: 0 on a result, 1 on any error,
// a declared exception included.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/pkg/buildinfo"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// errReported is returned after the command printed its own outcome (a
// declared exception in --json mode): only the exit status is left to set.
var errReported = errors.New("reported")

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintln(stderr, "hatrpc: "+describeErr(err))
		}
		return 1
	}
	return 0
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "hatrpc",
		Short:         "Call any Thrift server with JSON, from the IDL read at run time",
		Version:       buildinfo.Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newListCmd(), newDescribeCmd(), newCallCmd(), newRDMAInfoCmd())
	return root
}
