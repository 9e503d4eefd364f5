package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/pkg/idl"
)

// newPlainCmd: `hatgen plain FILE` prints FILE without its hints. Apache's
// compiler stops at the first hint with "syntax error", so teams generating
// Python or Java from the same IDL feed it this instead.
func newPlainCmd(stdout, stderr io.Writer) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "plain [-o OUT] FILE",
		Short: "Write FILE without HatRPC hints (plain Thrift IDL for other compilers)",
		Long: "Writes FILE with every hint group and function hint block removed and all else\n" +
			"(comments, layout, annotations) unchanged, to stdout or to OUT. Included files\n" +
			"are not followed: run plain on each one that has hints.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			plain, err := idl.StripHints(args[0], src)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return errReported
			}
			if out == "" {
				_, err = stdout.Write(plain)
				return err
			}
			return os.WriteFile(out, plain, 0o644)
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "output file (default: stdout)")
	return cmd
}
