package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/idl"
)

// thriftPy runs Apache's compiler (Debian's thrift-compiler) on file.
func thriftPy(t *testing.T, file string) (string, error) {
	t.Helper()
	_, err := exec.LookPath("thrift")
	require.NoError(t, err, "this test needs Apache's compiler (Debian's thrift-compiler)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "thrift", "--gen", "py", "-out", t.TempDir(), file).CombinedOutput()
	return string(out), err
}

func TestPlainEcho(t *testing.T) {
	code, out, stderr := runHatgen("plain", "../../examples/echo/echo.thrift")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, `// The echo service of the "Your first service" guide (README.md).
//
// Everything here is plain Apache Thrift IDL except the hint groups: a
// `+"`hint:`"+` group applies to both sides, `+"`s_hint:`"+` to the server only and
// `+"`c_hint:`"+` to the client only. Service-level groups come first in the
// service body; a function's own groups go in [ ... ] after its signature
// and override the service-level ones for that function.
namespace go echo

exception EchoError {
  1: string message,
}

service Echo {

  // Returns msg unchanged; an empty msg is refused with EchoError.
  string echo(1: string msg) throws (1: EchoError err),

  // Bulk data: tell the runtime it is about throughput and large payloads,
  // and that the handler keeps nothing of data once it returns.
  binary echoBytes(1: binary data)
}
`, out)
}

// TestPlainAcceptedByApache: Apache's compiler rejects every hinted file
// and accepts hatgen plain's output of it, which still describes the same
// services, functions and types.
func TestPlainAcceptedByApache(t *testing.T) {
	tests := []struct {
		name  string
		files []string // the first is compiled; the others are its includes
	}{
		{"echo example", []string{"../../examples/echo/echo.thrift"}},
		{"hints golden", []string{"../../internal/codegen/testdata/cases/hints/hints.thrift"}},
		{"extends golden", []string{"../../internal/codegen/testdata/cases/extends/extends.thrift",
			"../../internal/codegen/testdata/cases/extends/base.thrift"}},
		{"interop", []string{"../../test/testdata/interop_hinted.thrift"}},
		{"hatkv", []string{"../../internal/hatkv/hatkv.thrift"}},
		{"explain testdata", []string{"testdata/kv.thrift"}},
		{"stream example", []string{"../../examples/stream/logs.thrift"}},
		{"streams golden", []string{"../../internal/codegen/testdata/cases/streams/streams.thrift",
			"../../internal/codegen/testdata/cases/streams/streambase.thrift"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := thriftPy(t, tc.files[0])
			require.Error(t, err, "Apache's compiler accepted hinted IDL: %s", out)
			assert.Contains(t, out, "syntax error")

			dir := t.TempDir()
			for _, f := range tc.files {
				code, plain, stderr := runHatgen("plain", f)
				require.Equal(t, 0, code, stderr)
				body := regexp.MustCompile(`//.*|#.*|/\*(?s:.*?)\*/`).ReplaceAllString(plain, "")
				assert.NotRegexp(t, `\b(s_|c_)?hint\s*:`, body)
				require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(plain), 0o644))
			}
			out, err = thriftPy(t, filepath.Join(dir, filepath.Base(tc.files[0])))
			require.NoError(t, err, "thrift --gen py on the plain IDL: %s", out)

			hinted, diags, err := idl.Load(tc.files[0], nil)
			require.NoError(t, err, "%v", diags)
			plain, diags, err := idl.Load(filepath.Join(dir, filepath.Base(tc.files[0])), nil)
			require.NoError(t, err, "%v", diags)
			assert.Equal(t, shape(hinted), shape(plain))
		})
	}
}

// shape lists a program's definitions and functions, hints aside.
func shape(p *idl.Program) []string {
	var out []string
	for _, inc := range p.Includes {
		out = append(out, shape(inc.Program)...)
	}
	for _, s := range p.Structs {
		out = append(out, "struct "+s.Name)
	}
	for _, e := range p.Enums {
		out = append(out, "enum "+e.Name)
	}
	for _, s := range p.Services {
		for _, fn := range s.Functions {
			out = append(out, s.Name+"."+fn.Name+" stream="+fn.Stream.String()) // plain keeps the annotation
		}
	}
	return out
}

func TestPlainErrors(t *testing.T) {
	code, _, stderr := runHatgen("plain", "testdata/badsyntax.thrift")
	assert.Equal(t, 0, code, "a resolve error is not a syntax error: plain still works")
	assert.Empty(t, stderr)

	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.thrift")
	require.NoError(t, os.WriteFile(bad, []byte("service S {\n  hint: perf_goal;\n}\n"), 0o644))
	code, _, stderr = runHatgen("plain", bad)
	assert.Equal(t, 1, code)
	assert.Equal(t, bad+`:2:18: missing "=" after hint key "perf_goal" (found ";")`, strings.TrimSpace(stderr))
}
