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

// FuzzStripHints: for any source StripHints either reports a positioned
// syntax error or returns text that parses, holds no hint group, and
// declares the same services and functions as the input.
func FuzzStripHints(f *testing.F) {
	for _, s := range []string{
		"service S {\n  hint: perf_goal = latency;\n  void f() [ c_hint: timeout = 1s; ],\n}\n",
		"service S { s_hint: a=b; i32 g(1: i32 x) throws (1: E e), [hint: x=4KiB] }",
		"struct A { hint: a=b; 1: i32 hint }\nenum E { hint: a=b; X }\n",
		"const list<i32> L = [1, 2]\nservice S { void f() [] }",
		"struct i8s { 1: i8 i8 }\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out, err := StripHints("fuzz.thrift", []byte(src))
		if err != nil {
			if !diagLine.MatchString(err.Error()) {
				t.Fatalf("malformed error %q", err)
			}
			return
		}
		before, d := parseSource("fuzz.thrift", src)
		if d != nil {
			t.Fatalf("StripHints accepted what the parser rejects: %v", d)
		}
		after, d := parseSource("fuzz.thrift", string(out))
		if d != nil {
			t.Fatalf("output does not parse: %v\n%s", d, out)
		}
		if spans := hintSpans(after.doc); len(spans) != 0 {
			t.Fatalf("%d hint constructs left in\n%s", len(spans), out)
		}
		if a, b := functionNames(before.doc), functionNames(after.doc); a != b {
			t.Fatalf("functions changed: %q -> %q", a, b)
		}
	})
}

func functionNames(doc *astDocument) string {
	var b strings.Builder
	for _, it := range doc.Items {
		if it.Service == nil {
			continue
		}
		b.WriteString(it.Service.Name.Name + "{")
		for _, m := range it.Service.Members {
			if m.Function != nil {
				b.WriteString(m.Function.Name.Name + ",")
			}
		}
		b.WriteString("}")
	}
	return b.String()
}

func TestStripHintsKeepsTokensApart(t *testing.T) {
	tests := []struct{ src, want string }{
		{"struct A { 1: i32 a hint: k=v;2: i32 b }", "struct A { 1: i32 a 2: i32 b }"},
		{"service S {void f()[hint: k=v;]void g()}", "service S {void f()void g()}"},
		{"service S {\n  hint: k=v;\n  void f() [ hint: k=v; ],\n}\n", "service S {\n  void f(),\n}\n"},
	}
	for _, tc := range tests {
		out, err := StripHints("t.thrift", []byte(tc.src))
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != tc.want {
			t.Errorf("StripHints(%q) = %q, want %q", tc.src, out, tc.want)
		}
	}
}
