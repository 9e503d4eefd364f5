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
)

func newExplainCmd(stdout, stderr io.Writer) *cobra.Command {
	var includes []string
	var cores int
	var sizesFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "explain FILE [--cores N] [--sizes 512,131072] [--json]",
		Short: "Show resolved hints with their origin and the plan per message size",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sizes, err := parseSizes(sizesFlag)
			if err != nil {
				return err
			}
			if cores < 1 {
				return fmt.Errorf("--cores must be at least 1, got %d", cores)
			}
			prog, err := load(args[0], includes, stderr)
			if err != nil {
				return err
			}
			rows, err := codegen.Explain(prog, cores, sizes)
			if err != nil {
				printErrors(stderr, err)
				return errReported
			}
			if asJSON {
				if rows == nil {
					rows = []codegen.ExplainRow{}
				}
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return printTable(stdout, rows)
		},
	}
	cmd.Flags().StringArrayVarP(&includes, "include", "I", nil, "include directory (repeatable)")
	cmd.Flags().IntVar(&cores, "cores", runtime.NumCPU(), "cores of the machine the plan is for")
	cmd.Flags().StringVar(&sizesFlag, "sizes", "512,131072", "message sizes in bytes when no payload_size hint is set")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON array of rows")
	return cmd
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

// printTable prints, per function and side, the non-default hints with their
// origin and then one plan line per message size.
func printTable(w io.Writer, rows []codegen.ExplainRow) error {
	for i := 0; i < len(rows); {
		r := rows[i]
		j := i
		for j < len(rows) && rows[j].Service == r.Service && rows[j].Function == r.Function && rows[j].Side == r.Side {
			j++
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s.%s (%s)\n", r.Service, r.Function, r.Side)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		shown := 0
		for _, h := range r.Hints {
			if h.Origin == "default" {
				continue
			}
			shown++
			fmt.Fprintf(tw, "  %s=%s\t%s\n", h.Key, h.Value, h.Origin)
		}
		if d := len(r.Hints) - shown; d > 0 {
			fmt.Fprintf(tw, "  (%d other hints at their defaults; --json lists them)\n", d)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  SIZE\tTRANSPORT\tPROTOCOL\tPOLLING\tGOAL\tSUBSCRIPTION\tQP_SHARING\tSIZE FROM\n")
		for _, p := range rows[i:j] {
			share := "off"
			if p.Plan.QPSharing {
				share = "on" // the runtime routes it through FLOCK when its payloads are declared and fit
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.MessageSize, p.Transport, p.Protocol, p.Polling,
				p.Plan.Goal, p.Plan.Subscription, share, p.SizeFrom)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		i = j
	}
	return nil
}
