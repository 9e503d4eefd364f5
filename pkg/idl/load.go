package idl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Load parses path and every file it includes (relative to the including
// file, then each of includeDirs), resolves names and checks the program.
// The returned *Diagnostics is never nil; the error is that same value when
// it holds at least one error (warnings alone do not fail).
func Load(path string, includeDirs []string) (*Program, *Diagnostics, error) {
	return load(osSource{}, path, includeDirs)
}

// LoadFS is Load over an fs.FS (slash-separated paths), handy for tests and
// embedded IDL.
func LoadFS(fsys fs.FS, path string, includeDirs []string) (*Program, *Diagnostics, error) {
	return load(fsSource{fsys}, path, includeDirs)
}

// ParseString loads a single in-memory file named name; includes are
// resolved against the operating system's file system.
func ParseString(name, src string) (*Program, *Diagnostics, error) {
	return load(memSource{name: name, src: src}, name, nil)
}

// source abstracts the file system so Load, LoadFS and ParseString share
// one loader.
type source interface {
	read(p string) ([]byte, error)
	join(dir, p string) string
	dir(p string) string
	isAbs(p string) bool
	key(p string) string // identity of a file, so a file included twice is parsed once
}

type osSource struct{}

func (osSource) read(p string) ([]byte, error) { return os.ReadFile(p) }
func (osSource) join(d, p string) string       { return filepath.Join(d, p) }
func (osSource) dir(p string) string           { return filepath.Dir(p) }
func (osSource) isAbs(p string) bool           { return filepath.IsAbs(p) }
func (osSource) key(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			return real
		}
		return abs
	}
	return filepath.Clean(p)
}

type fsSource struct{ fsys fs.FS }

func (s fsSource) read(p string) ([]byte, error) { return fs.ReadFile(s.fsys, path.Clean(p)) }
func (fsSource) join(d, p string) string         { return path.Join(d, p) }
func (fsSource) dir(p string) string             { return path.Dir(p) }
func (fsSource) isAbs(p string) bool             { return path.IsAbs(p) }
func (fsSource) key(p string) string             { return path.Clean(p) }

type memSource struct {
	osSource
	name, src string
}

func (m memSource) read(p string) ([]byte, error) {
	if p == m.name {
		return []byte(m.src), nil
	}
	return m.osSource.read(p)
}

func (m memSource) key(p string) string {
	if p == m.name {
		return "\x00mem:" + p
	}
	return m.osSource.key(p)
}

// unit is one loaded file with the loader's bookkeeping.
type unit struct {
	prog    *Program
	ast     *parsedFile
	key     string
	loading bool
	failed  bool // a syntax error stopped this file; names from it are unknowable
	scope   *scope
	// pending work collected while building, resolved once every file is loaded
	typeRefs []*Type
	sources  map[*Service]*astService
}

type loader struct {
	src   source
	dirs  []string
	diags *Diagnostics
	units map[string]*unit
	order []*unit
	stack []*unit
	byPrg map[*Program]*unit
}

func load(src source, root string, dirs []string) (*Program, *Diagnostics, error) {
	l := &loader{src: src, dirs: dirs, diags: &Diagnostics{}, units: map[string]*unit{}, byPrg: map[*Program]*unit{}}
	data, err := src.read(root)
	if err != nil {
		l.diags.errorf(ErrIO, Pos{File: root, Line: 1, Col: 1}, "cannot read file: "+ioReason(err))
		return nil, l.diags, l.diags
	}
	u := l.loadUnit(root, data)
	for _, v := range l.order {
		l.resolve(v)
	}
	for _, v := range l.order {
		l.check(v)
	}
	order := map[string]int{}
	for i, v := range l.order {
		order[v.prog.Path] = i
	}
	l.diags.sortBy(order)
	if l.diags.HasErrors() {
		return u.prog, l.diags, l.diags
	}
	return u.prog, l.diags, nil
}

func ioReason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// programName is the include prefix: the base name without ".thrift".
func programName(p string) string {
	base := p
	if i := strings.LastIndexAny(base, `/\`); i >= 0 {
		base = base[i+1:]
	}
	return strings.TrimSuffix(base, ".thrift")
}

func (l *loader) loadUnit(p string, data []byte) *unit {
	u := &unit{key: l.src.key(p), loading: true, sources: map[*Service]*astService{}}
	u.prog = &Program{Path: p, Name: programName(p), Namespaces: map[string]string{}}
	l.units[u.key] = u
	l.byPrg[u.prog] = u
	l.order = append(l.order, u)
	l.stack = append(l.stack, u)
	defer func() {
		u.loading = false
		l.stack = l.stack[:len(l.stack)-1]
	}()
	pf, d := parseSource(p, string(data))
	if d != nil {
		l.diags.Errors = append(l.diags.Errors, d)
		u.failed = true
		u.scope = newScope()
		return u
	}
	u.ast = pf
	l.build(u)
	return u
}

// include resolves and loads one include of u.
func (l *loader) include(u *unit, inc *Include) {
	var candidates []string
	if l.src.isAbs(inc.Path) {
		candidates = []string{inc.Path}
	} else {
		candidates = append(candidates, l.src.join(l.src.dir(u.prog.Path), inc.Path))
		for _, d := range l.dirs {
			candidates = append(candidates, l.src.join(d, inc.Path))
		}
	}
	for _, c := range candidates {
		if v, ok := l.units[l.src.key(c)]; ok {
			if v.loading {
				l.diags.errorf(ErrInclude, inc.Pos, "include cycle: "+l.cycle(v))
				return
			}
			inc.Program = v.prog
			return
		}
		data, err := l.src.read(c)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			l.diags.errorf(ErrInclude, inc.Pos, fmt.Sprintf("cannot read included file %q: %s", c, ioReason(err)))
			return
		}
		inc.Program = l.loadUnit(c, data).prog
		return
	}
	msg := fmt.Sprintf("cannot find included file %q", inc.Path)
	if len(l.dirs) > 0 {
		msg += fmt.Sprintf(" (searched %s and %s)", l.src.dir(u.prog.Path), strings.Join(l.dirs, ", "))
	}
	l.diags.errorf(ErrInclude, inc.Pos, msg)
}

// cycle renders the include chain from v back to v.
func (l *loader) cycle(v *unit) string {
	var names []string
	started := false
	for _, s := range l.stack {
		if s == v {
			started = true
		}
		if started {
			names = append(names, s.prog.Path)
		}
	}
	names = append(names, v.prog.Path)
	return strings.Join(names, " -> ")
}
