// Package codegen turns a resolved HatRPC IDL program into Go packages laid
// out like Apache Thrift's `thrift --gen go -out DIR`, with types that encode
// themselves through pkg/proto and services bound to pkg/server and
// pkg/client.
//
// A program with services gives two packages: DIR/<pkg> (types, hints, the
// XHandler interfaces and the XClient callers: it imports pkg/client but not
// pkg/server) and DIR/<pkg>/<pkg>server (RegisterX, binding a handler to a
// *server.Server, and NewXService, the server.Service it registers), so a
// client-only binary links no server or metrics code, the way gRPC-Go's
// client stubs need no server. Streaming functions get gRPC-Go's stream API
// (streams.go).
package codegen

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/idl"
)

// File is one generated file; Path is relative to the output directory.
type File struct {
	Path    string
	Content []byte
}

// Option configures Generate.
type Option func(*config)

type config struct {
	goPackage string
}

// WithGoPackage sets the import path of the output directory, used for
// imports between generated packages (Apache's package_prefix).
func WithGoPackage(importPath string) Option {
	return func(c *config) { c.goPackage = strings.TrimSuffix(importPath, "/") }
}

// ErrGenerate matches the errors Generate and Check report about what the Go
// mapping cannot express (hint problems come as hints.Errors, matching the
// hints.Err* kinds).
var ErrGenerate = errors.New("codegen: cannot generate")

// GenError is a generation error at an IDL position.
type GenError struct {
	Pos idl.Pos
	Msg string
}

func (e *GenError) Error() string { return e.Pos.String() + ": " + e.Msg }
func (e *GenError) Unwrap() error { return ErrGenerate }

// pkgInfo is where a program's Go package lives.
type pkgInfo struct {
	name       string // package clause
	dir        string // relative output directory
	importPath string
}

// genSet is the state shared by the programs of one Generate call.
type genSet struct {
	cfg       config
	needEntry map[string]pkgInfo // import path -> package that needs MapEntry
}

// Generate renders prog and every program it includes, transitively. The
// result is sorted by path.
func Generate(prog *idl.Program, opts ...Option) ([]File, error) {
	set := &genSet{needEntry: map[string]pkgInfo{}}
	for _, o := range opts {
		o(&set.cfg)
	}
	var files []File
	owner := map[string]*idl.Program{}
	for _, p := range prog.Closure() {
		fs, err := set.generateProgram(p)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			if prev, ok := owner[f.Path]; ok {
				return nil, &GenError{Pos: idl.Pos{File: p.Path, Line: 1, Col: 1},
					Msg: fmt.Sprintf("generates %s, as %s does: give one of them another go namespace", f.Path, prev.Path)}
			}
			owner[f.Path] = p
		}
		files = append(files, fs...)
	}
	paths := make([]string, 0, len(set.needEntry))
	for p := range set.needEntry {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		pi := set.needEntry[p]
		src, err := genEntryFile(pi)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: path.Join(pi.dir, "hatgen-mapentry.go"), Content: src})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// goNamespace is Apache's get_real_go_module: the go namespace, the `*`
// namespace, else the lower-cased program name.
func goNamespace(p *idl.Program) string {
	if ns := p.Namespaces["go"]; ns != "" {
		return ns
	}
	if ns := p.Namespaces["*"]; ns != "" {
		return ns
	}
	return strings.ToLower(p.Name)
}

func (s *genSet) pkgOf(p *idl.Program) pkgInfo {
	ns := goNamespace(p)
	dir := strings.ReplaceAll(ns, ".", "/")
	ip := dir
	if s.cfg.goPackage != "" {
		ip = s.cfg.goPackage + "/" + dir
	}
	return pkgInfo{name: ns[strings.LastIndexByte(ns, '.')+1:], dir: dir, importPath: ip}
}

// generator renders the files of one program.
type generator struct {
	set       *genSet
	prog      *idl.Program
	pkg       pkgInfo
	aliases   map[string]string // import path -> identifier
	protoName string
	e         *emitter
}

func (g *generator) pkgOf(p *idl.Program) pkgInfo { return g.set.pkgOf(p) }

// reservedIdents are package names generated code imports; generated
// packages that collide with them get a numbered alias.
var reservedIdents = []string{"context", "errors", "fmt", "driver", "proto", "hints", "server", "client", "stream", "metadata", "io"}

func (s *genSet) newGenerator(p *idl.Program) *generator {
	return s.newGeneratorIn(p, s.pkgOf(p))
}

// serverPkg is where a program's service registration goes: the
// subpackage <pkg>server of its types package.
func serverPkg(types pkgInfo) pkgInfo {
	name := types.name + "server"
	return pkgInfo{name: name, dir: path.Join(types.dir, name), importPath: types.importPath + "/" + name}
}

// newGeneratorIn renders p's declarations into package pkg (its own, or
// its server subpackage, where p's own names need qualifying).
func (s *genSet) newGeneratorIn(p *idl.Program, pkg pkgInfo) *generator {
	g := &generator{set: s, prog: p, pkg: pkg, aliases: map[string]string{}, protoName: "proto"}
	used := map[string]bool{}
	for _, r := range reservedIdents {
		used[r] = true
	}
	var paths []string
	byPath := map[string]pkgInfo{}
	for _, q := range p.Closure() {
		pi := s.pkgOf(q)
		if pi.importPath == g.pkg.importPath {
			continue
		}
		if _, ok := byPath[pi.importPath]; !ok {
			paths = append(paths, pi.importPath)
		}
		byPath[pi.importPath] = pi
	}
	sort.Strings(paths)
	for _, ip := range paths {
		name := byPath[ip].name
		alias := name
		for n := 2; used[alias]; n++ {
			alias = name + strconv.Itoa(n)
		}
		used[alias] = true
		g.aliases[ip] = alias
	}
	return g
}

// qual qualifies a top-level Go name declared by program p.
func (g *generator) qual(p *idl.Program, name string) string {
	pi := g.pkgOf(p)
	if pi.importPath == g.pkg.importPath {
		return name
	}
	alias, ok := g.aliases[pi.importPath]
	if !ok {
		// Not in the include closure (cannot happen for a resolved program);
		// fall back to the package name so the error shows up at compile time.
		alias = pi.name
	}
	return g.e.use(pi.importPath, alias) + "." + name
}

func (s *genSet) generateProgram(p *idl.Program) ([]File, error) {
	g := s.newGenerator(p)
	if err := g.check(); err != nil {
		return nil, err
	}
	var files []File
	g.e = newEmitter()
	for _, td := range p.Typedefs {
		g.genTypedef(td)
	}
	for _, en := range p.Enums {
		g.genEnum(en)
	}
	for _, st := range p.Structs {
		g.genStruct(g.structInfo(st))
	}
	for _, svc := range p.Services {
		if err := g.genService(svc); err != nil {
			return nil, err
		}
	}
	src, err := g.e.render(g.pkg.name, "")
	if err != nil {
		return nil, err
	}
	files = append(files, File{Path: path.Join(g.pkg.dir, p.Name+".go"), Content: src})
	if len(p.Services) > 0 {
		sg := s.newGeneratorIn(p, serverPkg(g.pkg))
		sg.e = newEmitter()
		for _, svc := range p.Services {
			sg.genRegister(svc, svc.AllFunctions())
		}
		src, err := sg.e.render(sg.pkg.name, "")
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: path.Join(sg.pkg.dir, p.Name+".go"), Content: src})
	}
	if len(p.Consts) > 0 {
		g.e = newEmitter()
		for _, c := range p.Consts {
			g.genConst(c)
		}
		src, err := g.e.render(g.pkg.name, "")
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: path.Join(g.pkg.dir, p.Name+"-consts.go"), Content: src})
	}
	return files, nil
}

// check rejects what the Go mapping cannot express, before any output.
func (g *generator) check() error {
	for _, en := range g.prog.Enums {
		if en.Senum {
			return &GenError{Pos: en.Pos, Msg: "senum " + en.Name + " is not supported by the Go generator"}
		}
	}
	if g.pkg.name == "main" {
		return &GenError{Pos: idl.Pos{File: g.prog.Path, Line: 1, Col: 1},
			Msg: "go namespace " + goNamespace(g.prog) + " yields package main, which cannot be imported; choose another namespace"}
	}
	names := map[string]idl.Pos{}
	add := func(name string, pos idl.Pos) error {
		if prev, ok := names[name]; ok {
			return &GenError{Pos: pos, Msg: fmt.Sprintf("Go name %s collides with the declaration at %s", name, prev)}
		}
		names[name] = pos
		return nil
	}
	for _, td := range g.prog.Typedefs {
		if err := add(publicize(td.Name), td.Pos); err != nil {
			return err
		}
	}
	for _, en := range g.prog.Enums {
		if err := add(publicize(en.Name), en.Pos); err != nil {
			return err
		}
	}
	for _, st := range g.prog.Structs {
		if err := add(publicize(st.Name), st.Pos); err != nil {
			return err
		}
	}
	for _, c := range g.prog.Consts {
		if err := add(publicize(c.Name), c.Pos); err != nil {
			return err
		}
	}
	for _, svc := range g.prog.Services {
		s := publicize(svc.Name)
		for _, n := range []string{s + "Handler", s + "Client", s + "Hints", "Register" + s, "New" + s + "Client", "clientMethods" + s} {
			if err := add(n, svc.Pos); err != nil {
				return err
			}
		}
		for _, fn := range svc.Functions {
			ns := []string{argsName(svc.Name, fn.Name), resultName(svc.Name, fn.Name)}
			if isStream(fn) {
				ns = append(ns, streamIfaceName(fn, "Client"), streamIfaceName(fn, "Server"))
			}
			for _, n := range ns {
				if err := add(n, fn.Pos); err != nil {
					return err
				}
			}
		}
		for _, fn := range svc.AllFunctions() {
			// The unexported stream types, in the types and server packages.
			if isStream(fn) {
				if err := add(streamImpl(svc, fn, "Client"), fn.Pos); err != nil {
					return err
				}
			}
		}
	}
	if _, ok := names[entryTypeName]; ok {
		return &GenError{Pos: names[entryTypeName], Msg: entryTypeName + " is reserved by hatgen for maps with non-scalar keys"}
	}
	return nil
}

// Check validates everything Generate would reject, for prog and its
// includes, and reports all problems at once (errors.Join of
// `file:line:col: message` errors).
func Check(prog *idl.Program) error {
	set := &genSet{needEntry: map[string]pkgInfo{}}
	var errs []error
	for _, p := range prog.Closure() {
		if err := set.newGenerator(p).check(); err != nil {
			errs = append(errs, err)
		}
		for _, svc := range p.Services {
			if _, err := svc.ResolveHints(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// methodNames are the methods every generated struct has; a field of the
// same Go name would not compile.
var methodNames = map[string]bool{
	"String": true, "EncodeBinary": true, "DecodeBinary": true, "EncodeCompact": true, "DecodeCompact": true,
}

// fieldGoName is a field's Go name before collisions are settled
// (fieldGoNames): Apache's publicize, plus a `_` when that would be a
// method the struct has (`6: string string` is String_, an exception's
// `error` field Error_), as Facebook's Go generator does.
func fieldGoName(kind idl.StructKind, name string) string {
	n := publicize(name)
	if methodNames[n] || (n == "Error" && kind == idl.StructKindException) {
		n += "_"
	}
	return n
}

// fieldGoNames are the Go names of a struct's fields, in their order. Fields
// whose names publicize alike (`theEdgeCase` and `TheEdgeCase`, `a_b`
// and `aB`) would be one Go field twice: Apache's Go generator writes
// exactly that, code that does not compile (its
// test/NameConflictTest.thrift). Here the first such field keeps the
// name and each later one takes `_`s until its name is no other field's,
// Apache's own way out of its other name clashes (a name starting "New"
// or ending "Args"/"Result" gets a `_`). Only Go names change: the wire
// carries field ids, and tags keep the IDL names.
func fieldGoNames(kind idl.StructKind, fields []*idl.Field) []string {
	names := make([]string, len(fields))
	taken := make(map[string]bool, len(fields))
	clash := false
	for i, f := range fields {
		n := fieldGoName(kind, f.Name)
		if taken[n] {
			clash = true
			continue // named below, once every field's own name is known
		}
		names[i], taken[n] = n, true
	}
	if !clash {
		return names
	}
	for i, f := range fields {
		if names[i] != "" {
			continue
		}
		n := fieldGoName(kind, f.Name) + "_"
		for taken[n] {
			n += "_"
		}
		names[i], taken[n] = n, true
	}
	return names
}
