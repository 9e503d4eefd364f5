package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/codegen"
	"github.com/hatrpc/hatrpc/pkg/hints"
)

func newExplainCmd(stdout, stderr io.Writer) *cobra.Command {
	var includes []string
	var cores, concurrency int
	var sizesFlag, provider string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "explain FILE [--provider shm|ibv|off] [--cores N] [--concurrency N] [--sizes 512,131072] [--json]",
		Short: "Show resolved hints with their origin and the plan table the runtime runs per function and side",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sizes []int
			if sizesFlag != "" {
				var err error
				if sizes, err = parseSizes(sizesFlag); err != nil {
					return err
				}
			}
			if cores < 1 {
				return fmt.Errorf("--cores must be at least 1, got %d", cores)
			}
			if concurrency < 0 {
				return fmt.Errorf("--concurrency must be at least 1, got %d", concurrency)
			}
			prov, err := parseProvider(provider)
			if err != nil {
				return err
			}
			prog, err := load(args[0], includes, stderr)
			if err != nil {
				return err
			}
			sides, err := codegen.Explain(prog, codegen.ExplainOptions{Cores: cores, Concurrency: concurrency, Provider: prov, Sizes: sizes})
			if err != nil {
				printErrors(stderr, err)
				return errReported
			}
			if asJSON {
				if sides == nil {
					sides = []codegen.ExplainSide{}
				}
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(sides)
			}
			return printTables(stdout, sides)
		},
	}
	cmd.Flags().StringArrayVarP(&includes, "include", "I", nil, "include directory (repeatable)")
	cmd.Flags().IntVar(&cores, "cores", runtime.NumCPU(), "cores of the machine the plan is for")
	cmd.Flags().IntVar(&concurrency, "concurrency", 0, "concurrent callers to plan for (0: the concurrency hints)")
	cmd.Flags().StringVar(&provider, "provider", "shm", "fast path the server offers: shm, ibv, or off (TCP only)")
	cmd.Flags().StringVar(&sizesFlag, "sizes", "", "message sizes in bytes to show the row of (e.g. 512,131072)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON array, an element per function and side")
	return cmd
}

// parseProvider reads --provider: the providers the planner knows, or off.
func parseProvider(s string) (hints.Provider, error) {
	switch s {
	case "shm":
		return hints.ProviderSHM, nil
	case "ibv":
		return hints.ProviderIBV, nil
	case "off", "tcp":
		return hints.Provider{}, nil
	}
	return hints.Provider{}, fmt.Errorf("--provider: %q is none of shm, ibv, off", s)
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--sizes: %q is not a byte count", part)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--sizes: no sizes given")
	}
	return out, nil
}

// printTables prints, per function and side, the non-default hints with
// their origin and then the table: its rows, its table-wide values and
// what adapts at run time.
func printTables(w io.Writer, sides []codegen.ExplainSide) error {
	for i, s := range sides {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s.%s (%s)\n", s.Service, s.Function, s.Side)
		if s.Stream != "" {
			fmt.Fprintf(w, "  stream=%s\n", s.Stream)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		shown := 0
		for _, h := range s.Hints {
			if h.Origin == "default" {
				continue
			}
			shown++
			fmt.Fprintf(tw, "  %s=%s\t%s\n", h.Key, h.Value, h.Origin)
		}
		if d := len(s.Hints) - shown; d > 0 {
			fmt.Fprintf(tw, "  (%d other hints at their defaults; --json lists them)\n", d)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := s.Table.Write(w, "  "); err != nil {
			return err
		}
		for _, a := range s.At {
			fmt.Fprintf(w, "  at %d: %s\n", a.Size, a.Row)
		}
	}
	return nil
}
