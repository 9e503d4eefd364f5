package idl

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

var diagLine = regexp.MustCompile(`^fuzz\.thrift:\d+:\d+: \S`)

// FuzzParse feeds arbitrary text to the whole pipeline (lexer, parser,
// resolver, checks). It must never panic or hang, every diagnostic must
// carry a position, and a successful load must yield a finite, resolved model.
// The seed corpus lives in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"struct A { 1: i32 a }",
		"service S { hint: a=b; void f() [c_hint: x=4KB] }",
		"typedef A B\ntypedef B A\n",
		"service A extends B {}\nservice B extends A {}\n",
		"const map<string,list<i32>> M = {\"a\": [1, 2]}",
		"enum E { A = 1, B }\nconst E e = E.B",
		"/** doc */ struct X {} // tail",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		fsys := fstest.MapFS{"fuzz.thrift": &fstest.MapFile{Data: []byte(src)}}
		done := make(chan struct{})
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second): // far above any real input; turns a hang into a crasher
				panic(fmt.Sprintf("HANG on %q", src))
			}
		}()
		defer close(done)
		p, diags, err := LoadFS(fsys, "fuzz.thrift", nil)
		if diags == nil {
			t.Fatal("nil diagnostics")
		}
		if (err != nil) != diags.HasErrors() {
			t.Fatalf("error %v does not match diagnostics %d", err, len(diags.Errors))
		}
		for _, d := range append(append([]*Diagnostic(nil), diags.Errors...), diags.Warnings...) {
			if !diagLine.MatchString(d.Error()) || strings.Contains(d.Msg, "\n") {
				t.Fatalf("malformed diagnostic %q", d.Error())
			}
		}
		if p == nil {
			t.Fatal("nil program for an existing file")
		}
		walkTypes(p, func(ty *Type) { ty.TrueType() })
		for _, s := range p.Services {
			if n := len(s.AllFunctions()); n < len(s.Functions) {
				t.Fatalf("AllFunctions lost functions: %d < %d", n, len(s.Functions))
			}
		}
		if err == nil {
			walkTypes(p, func(ty *Type) {
				if isNamed(ty) && !resolved(ty) {
					t.Fatalf("unresolved type %q without an error", ty.Name)
				}
			})
		}
	})
}

// walkTypes visits every type reference declared in p.
func walkTypes(p *Program, visit func(*Type)) {
	var rec func(*Type)
	rec = func(t *Type) {
		if t == nil {
			return
		}
		visit(t)
		rec(t.Key)
		rec(t.Elem)
	}
	for _, td := range p.Typedefs {
		rec(td.Type)
	}
	for _, c := range p.Consts {
		rec(c.Type)
	}
	for _, s := range p.Structs {
		for _, f := range s.Fields {
			rec(f.Type)
		}
	}
	for _, s := range p.Services {
		for _, f := range s.Functions {
			rec(f.Returns)
			for _, a := range f.Args {
				rec(a.Type)
			}
			for _, a := range f.Throws {
				rec(a.Type)
			}
		}
	}
}
