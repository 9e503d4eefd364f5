package generic

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// IDL is a Thrift file loaded at run time, with everything it includes.
type IDL struct {
	// Program is the root file; its includes are resolved.
	Program *idl.Program
	lim     proto.Limits
	opts    options
}

// Option configures Load (and a generic server: WithStreamHandler).
type Option func(*options)

type options struct {
	includeDirs []string
	limits      proto.Limits
	streams     StreamHandlerFunc // stream.go
}

// WithIncludeDirs adds directories searched for includes after the
// including file's own directory (thrift's -I).
func WithIncludeDirs(dirs ...string) Option {
	return func(o *options) { o.includeDirs = append(o.includeDirs, dirs...) }
}

// WithLimits bounds what values decode to and what JSON encodes from
// (nesting depth, string and container sizes); proto.DefaultLimits when not
// given.
func WithLimits(l proto.Limits) Option { return func(o *options) { o.limits = l } }

// Load parses path and its includes with pkg/idl. An IDL or hint mistake is
// returned as pkg/idl reports it, one `file:line:col: message` per line.
func Load(path string, opts ...Option) (*IDL, error) {
	o := options{limits: proto.DefaultLimits}
	for _, f := range opts {
		f(&o)
	}
	prog, _, err := idl.Load(path, o.includeDirs)
	if err != nil {
		return nil, err
	}
	return &IDL{Program: prog, lim: o.limits, opts: o}, nil
}

// FromProgram wraps an already loaded program.
func FromProgram(p *idl.Program, opts ...Option) *IDL {
	o := options{limits: proto.DefaultLimits}
	for _, f := range opts {
		f(&o)
	}
	return &IDL{Program: p, lim: o.limits, opts: o}
}

// ErrNotFound matches every lookup of a service, function or type the IDL
// does not declare.
var ErrNotFound = errors.New("generic: not found")

// NotFoundError names what was looked up and what there is instead.
type NotFoundError struct {
	Kind, Name string
	Have       []string
}

func (e *NotFoundError) Error() string {
	msg := fmt.Sprintf("no %s %q", e.Kind, e.Name)
	if len(e.Have) > 0 {
		msg += " (have " + strings.Join(e.Have, ", ") + ")"
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// Programs returns the root program followed by every included one, each
// once, depth first in include order.
func (d *IDL) Programs() []*idl.Program { return d.Program.Closure() }

// qualified is name as the root file refers to it: bare in the root file,
// "prefix.Name" in an included one.
func (d *IDL) qualified(p *idl.Program, name string) string {
	if p == d.Program {
		return name
	}
	return p.Name + "." + name
}

// Services returns every service of the root file and its includes, for
// listing; Service resolves one's hints for calling and serving it.
func (d *IDL) Services() []*Service {
	var out []*Service
	for _, p := range d.Programs() {
		for _, s := range p.Services {
			out = append(out, &Service{idl: d, Decl: s, QualifiedName: d.qualified(p, s.Name)})
		}
	}
	return out
}

// Service finds a service by its name ("KV") or, for an included file's,
// "prefix.KV"; a bare name also finds an included service when only one
// has it.
func (d *IDL) Service(name string) (*Service, error) {
	all := d.Services()
	var names []string
	var byBare []*Service
	for _, s := range all {
		if s.QualifiedName == name {
			return d.prepare(s)
		}
		if s.Decl.Name == name {
			byBare = append(byBare, s)
		}
		names = append(names, s.QualifiedName)
	}
	if len(byBare) == 1 {
		return d.prepare(byBare[0])
	}
	return nil, &NotFoundError{Kind: "service", Name: name, Have: names}
}

func (d *IDL) prepare(s *Service) (*Service, error) {
	res, err := s.Decl.ResolveHints()
	if err != nil {
		return nil, err
	}
	table := res.Service()
	s.Hints = &table
	s.funcs = map[string]*idl.Function{}
	for _, fn := range s.Decl.AllFunctions() {
		s.funcs[fn.Name] = fn
	}
	return s, nil
}

// Type finds a struct, union, exception, enum or typedef by name (bare or
// "prefix.Name").
func (d *IDL) Type(name string) (any, error) {
	var names []string
	for _, p := range d.Programs() {
		for _, s := range p.Structs {
			if q := d.qualified(p, s.Name); q == name || s.Name == name && p == d.Program {
				return s, nil
			}
			names = append(names, d.qualified(p, s.Name))
		}
		for _, e := range p.Enums {
			if q := d.qualified(p, e.Name); q == name || e.Name == name && p == d.Program {
				return e, nil
			}
			names = append(names, d.qualified(p, e.Name))
		}
		for _, t := range p.Typedefs {
			if q := d.qualified(p, t.Name); q == name || t.Name == name && p == d.Program {
				return t, nil
			}
			names = append(names, d.qualified(p, t.Name))
		}
	}
	sort.Strings(names)
	return nil, &NotFoundError{Kind: "type", Name: name, Have: names}
}

// Service is one service of an IDL: its functions (inherited ones too) and
// its resolved hint table, which calls and the server plan with as
// generated code does.
type Service struct {
	idl           *IDL
	Decl          *idl.Service
	QualifiedName string
	Hints         *hints.Service
	funcs         map[string]*idl.Function
}

// Name is the service's name as registered and multiplexed ("KV").
func (s *Service) Name() string { return s.Decl.Name }

// Functions returns every function, inherited ones first.
func (s *Service) Functions() []*idl.Function { return s.Decl.AllFunctions() }

// Function finds a function by name, inherited ones included.
func (s *Service) Function(name string) (*idl.Function, error) {
	if fn, ok := s.funcs[name]; ok {
		return fn, nil
	}
	var names []string
	for _, fn := range s.Functions() {
		if fn.Name == name {
			return fn, nil // a Service from Services, not indexed
		}
		names = append(names, fn.Name)
	}
	return nil, &NotFoundError{Kind: "function", Name: s.Decl.Name + "." + name, Have: names}
}
