// Command hatgen checks hint-extended Thrift IDL, explains the resolved hints
// and plans, and generates Go packages for HatRPC.
//
//	hatgen generate [-o DIR] [-I DIR]... [--go-package IMPORT/PATH] FILE.thrift...
//	hatgen check [-I DIR]... FILE...
//	hatgen explain [-I DIR]... FILE [--cores N] [--sizes 512,131072] [--json]
//	hatgen plain [-o OUT] FILE
//	hatgen --version
//
// generate lays packages out like `thrift --gen go -out DIR`: `namespace go
// a.b` becomes DIR/a/b (package b), falling back to the `*` namespace and
// then to the file's base name; --go-package is DIR's import path, by
// default derived from the go.mod above DIR (module path + DIR relative to
// the module root). plain writes FILE without its hints, for Apache's
// compiler and other Thrift tools. Errors
// print as `file:line:col: message`, one per line, and exit with status 1;
// warnings print with a `warning:` prefix and do not fail.
//
// In a Go package, generate with
//
//	//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o gen x.thrift
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/codegen"
	"github.com/hatrpc/hatrpc/pkg/buildinfo"
	"github.com/hatrpc/hatrpc/pkg/idl"
)

// errReported marks a failure whose diagnostics were already printed.
var errReported = errors.New("hatgen: errors reported")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes hatgen with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintln(stderr, "hatgen:", err)
		}
		return 1
	}
	return 0
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "hatgen",
		Short:         "HatRPC IDL checker and Go code generator",
		Version:       buildinfo.Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newGenerateCmd(stderr), newCheckCmd(stdout, stderr), newExplainCmd(stdout, stderr),
		newPlainCmd(stdout, stderr))
	return root
}

// load parses a file and prints its diagnostics (`file:line:col: message`,
// one per line; warnings prefixed so they are told apart).
func load(path string, includeDirs []string, stderr io.Writer) (*idl.Program, error) {
	prog, diags, err := idl.Load(path, includeDirs)
	if diags != nil {
		for _, w := range diags.Warnings {
			fmt.Fprintf(stderr, "%s: warning: %s\n", w.Pos, w.Msg)
		}
		for _, e := range diags.Errors {
			fmt.Fprintln(stderr, e.Error())
		}
	}
	if err != nil {
		if diags == nil || !diags.HasErrors() {
			fmt.Fprintln(stderr, err)
		}
		return nil, errReported
	}
	return prog, nil
}

// printErrors prints every error of a (possibly joined) error, one per line.
func printErrors(stderr io.Writer, err error) {
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range m.Unwrap() {
			printErrors(stderr, e)
		}
		return
	}
	fmt.Fprintln(stderr, err.Error())
}

func newGenerateCmd(stderr io.Writer) *cobra.Command {
	var out, goPkg string
	var includes []string
	cmd := &cobra.Command{
		Use:   "generate [-o DIR] [-I DIR]... [--go-package IMPORT/PATH] FILE.thrift...",
		Short: "Generate one Go package per IDL file (and per included file)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			noModule := false
			if goPkg == "" {
				p, err := defaultGoPackage(out)
				if err != nil && !errors.Is(err, errNoModule) {
					return err
				}
				goPkg, noModule = p, err != nil
			}
			failed := false
			for _, file := range args {
				prog, err := load(file, includes, stderr)
				if err != nil {
					failed = true
					continue
				}
				if noModule && len(prog.Includes) > 0 {
					// The packages of included files would be imported
					// by their bare directory names, which do not build.
					fmt.Fprintf(stderr, "hatgen: warning: no go.mod above %s: included packages are imported by their directory alone; pass --go-package\n", out)
					noModule = false
				}
				files, err := codegen.Generate(prog, codegen.WithGoPackage(goPkg))
				if err != nil {
					printErrors(stderr, err)
					failed = true
					continue
				}
				if err := writeFiles(out, files); err != nil {
					return err
				}
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", ".", "output directory")
	cmd.Flags().StringArrayVarP(&includes, "include", "I", nil, "include directory (repeatable)")
	cmd.Flags().StringVar(&goPkg, "go-package", "", "import path of the output directory (default: from the go.mod above it)")
	return cmd
}

func writeFiles(dir string, files []codegen.File) error {
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func newCheckCmd(stdout, stderr io.Writer) *cobra.Command {
	var includes []string
	cmd := &cobra.Command{
		Use:   "check FILE...",
		Short: "Parse, resolve and validate hints; print errors as file:line:col: message",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := false
			for _, file := range args {
				prog, err := load(file, includes, stderr)
				if err != nil {
					failed = true
					continue
				}
				// Hints of every service (included files too) and what the Go
				// mapping cannot express.
				if err := codegen.Check(prog); err != nil {
					printErrors(stderr, err)
					failed = true
					continue
				}
				fmt.Fprintf(stdout, "%s: ok\n", file)
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&includes, "include", "I", nil, "include directory (repeatable)")
	return cmd
}
