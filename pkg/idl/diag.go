package idl

import (
	"errors"
	"sort"
	"strings"
)

// Error categories. Every Diagnostic wraps exactly one of them, so callers
// can test for a class of problem with errors.Is on a Diagnostic or on the
// whole *Diagnostics.
var (
	ErrSyntax         = errors.New("syntax error")
	ErrIO             = errors.New("cannot read file")
	ErrInclude        = errors.New("include error")
	ErrUnknown        = errors.New("unknown name")
	ErrDuplicate      = errors.New("duplicate definition")
	ErrConstValue     = errors.New("bad constant value")
	ErrFieldID        = errors.New("bad field id")
	ErrType           = errors.New("type misuse")
	ErrService        = errors.New("bad service definition")
	ErrHintPlacement  = errors.New("misplaced hint group")
	ErrStream         = errors.New("bad streaming function")
	ErrLegacyFieldKey = errors.New("legacy field key") // warnings only
)

// Diagnostic is one error or warning at a source position.
type Diagnostic struct {
	Pos  Pos
	Msg  string
	Kind error // one of the Err* categories above
}

// Error renders `file:line:col: message`.
func (d *Diagnostic) Error() string { return d.Pos.String() + ": " + d.Msg }

// Unwrap exposes the category for errors.Is.
func (d *Diagnostic) Unwrap() error { return d.Kind }

// Diagnostics collects every problem found by one Load.
type Diagnostics struct {
	Errors   []*Diagnostic
	Warnings []*Diagnostic
}

// Error joins all errors, one per line.
func (d *Diagnostics) Error() string {
	lines := make([]string, len(d.Errors))
	for i, e := range d.Errors {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is / errors.As look at every individual error.
func (d *Diagnostics) Unwrap() []error {
	out := make([]error, len(d.Errors))
	for i, e := range d.Errors {
		out[i] = e
	}
	return out
}

// HasErrors reports whether at least one error was recorded.
func (d *Diagnostics) HasErrors() bool { return d != nil && len(d.Errors) > 0 }

func (d *Diagnostics) errorf(kind error, p Pos, msg string) {
	d.Errors = append(d.Errors, &Diagnostic{Pos: p, Msg: msg, Kind: kind})
}

func (d *Diagnostics) warnf(p Pos, msg string) {
	d.Warnings = append(d.Warnings, &Diagnostic{Pos: p, Msg: msg, Kind: ErrLegacyFieldKey})
}

// sortBy orders diagnostics by file load order, then line and column, so the
// output reads top to bottom no matter which pass found a problem.
func (d *Diagnostics) sortBy(fileOrder map[string]int) {
	less := func(list []*Diagnostic) func(i, j int) bool {
		return func(i, j int) bool {
			a, b := list[i].Pos, list[j].Pos
			if a.File != b.File {
				return fileOrder[a.File] < fileOrder[b.File]
			}
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Col < b.Col
		}
	}
	sort.SliceStable(d.Errors, less(d.Errors))
	sort.SliceStable(d.Warnings, less(d.Warnings))
}
