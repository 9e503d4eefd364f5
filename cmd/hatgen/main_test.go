package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/testenv"
)

// diagLine is the shape of every error line: file:line:col: message.
var diagLine = regexp.MustCompile(`^[^:\s]+\.thrift:\d+:\d+: \S`)

func runHatgen(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func corpus(t *testing.T) []string {
	dir := testenv.SharedIDLDir(t)
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".thrift") {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files)
	return files
}

func TestCheckAcceptsCorpus(t *testing.T) {
	files := corpus(t)
	code, out, stderr := runHatgen(append([]string{"check"}, files...)...)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, len(files), strings.Count(out, ": ok\n"))
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		code      int
		wantLines []string // substrings, one per expected stderr line
	}{
		{"hint errors", "testdata/badhints.thrift", 1, []string{
			`testdata/badhints.thrift:2:19: bad value "speed" for perf_goal`,
			`testdata/badhints.thrift:3:21: unknown hint "no_such_key"`,
			`testdata/badhints.thrift:7:11: hint "rfp_retries" is not allowed in s_hint`,
		}},
		{"resolve error", "testdata/badsyntax.thrift", 1, []string{`testdata/badsyntax.thrift:3:6: unknown type "unknown_type"`}},
		{"warning only", "testdata/warn.thrift", 0, []string{`testdata/warn.thrift:2:7: warning: No field key specified`}},
		{"enum value with another enum's prefix", "testdata/enumprefix.thrift", 0, []string{
			`testdata/enumprefix.thrift:4:18: warning: MyEnum1.ME2_2: ME2_2 is a value of MyEnum2, not of MyEnum1; read as MyEnum2.ME2_2, as Apache's compiler does`}},
		{"clean", "testdata/kv.thrift", 0, nil},
		{"missing file", "testdata/nope.thrift", 1, []string{"nope.thrift"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runHatgen("check", tc.file)
			assert.Equal(t, tc.code, code, stderr)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(tc.wantLines) == 0 {
				assert.Empty(t, strings.TrimSpace(stderr))
				return
			}
			require.Len(t, lines, len(tc.wantLines), stderr)
			for i, want := range tc.wantLines {
				assert.Contains(t, lines[i], want)
				if tc.name != "missing file" {
					assert.Regexp(t, diagLine, lines[i])
				}
			}
		})
	}
}

type row struct {
	Service     string `json:"service"`
	Function    string `json:"function"`
	Side        string `json:"side"`
	MessageSize int    `json:"message_size"`
	Transport   string `json:"transport"`
	Protocol    string `json:"protocol"`
	Polling     string `json:"polling"`
	Hints       []struct {
		Key, Value, Origin string
	} `json:"hints"`
}

func TestExplainJSON(t *testing.T) {
	code, out, stderr := runHatgen("explain", "testdata/kv.thrift", "--cores", "4", "--sizes", "512,131072", "--json")
	require.Equal(t, 0, code, stderr)
	var rows []row
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	var raw []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, r := range raw {
		for _, k := range []string{"service", "function", "side", "message_size", "transport", "protocol", "polling"} {
			assert.Contains(t, r, k)
		}
	}
	type key struct {
		fn, side string
		size     int
	}
	got := map[key]row{}
	var keys []string
	for _, r := range rows {
		assert.Equal(t, "KV", r.Service)
		got[key{r.Function, r.Side, r.MessageSize}] = r
		keys = append(keys, r.Function+"/"+r.Side)
	}
	sort.Strings(keys)
	// get has payload_size on both sides: one row each; put uses --sizes.
	assert.Equal(t, []string{"get/client", "get/server", "put/client", "put/client", "put/server", "put/server"}, keys)
	tests := []struct {
		k                  key
		protocol, polling  string
		originKey, fromPos string
	}{
		{key{"get", "client", 4096}, "direct_write_imm", "busy", "payload_size", "kv.thrift:6:38"},
		{key{"get", "server", 131072}, "direct_write_imm", "event", "polling", "kv.thrift:5:11"},
		{key{"put", "client", 512}, "rfp", "busy", "protocol", "kv.thrift:7:53"},
		{key{"put", "client", 131072}, "rfp", "busy", "app.tag", "kv.thrift:7:67"},
		{key{"put", "server", 131072}, "direct_write_imm", "event", "perf_goal", "kv.thrift:4:9"},
	}
	for _, tc := range tests {
		r, ok := got[tc.k]
		require.True(t, ok, "%v", tc.k)
		assert.Equal(t, tc.protocol, r.Protocol, "%v", tc.k)
		assert.Equal(t, tc.polling, r.Polling, "%v", tc.k)
		assert.Equal(t, "auto", r.Transport)
		found := false
		for _, h := range r.Hints {
			if h.Key == tc.originKey {
				found = true
				assert.Contains(t, h.Origin, tc.fromPos)
			}
		}
		assert.True(t, found, "hint %s listed for %v", tc.originKey, tc.k)
	}
}

func TestExplainTable(t *testing.T) {
	code, out, stderr := runHatgen("explain", "testdata/kv.thrift", "--cores", "4")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"KV.get (client)", "KV.put (server)",
		"payload_size=4KiB", "testdata/kv.thrift:6:38 (function c_hint)",
		"polling=event", "(service s_hint)",
		"SIZE", "PROTOCOL", "POLLING", "QP_SHARING",
	} {
		assert.Contains(t, out, want)
	}
	assert.Regexp(t, `(?m)^\s+4096\s+auto\s+direct_write_imm\s+busy\s+throughput\s+under\s+off\s+payload_size$`, out)
	assert.Regexp(t, `(?m)^\s+131072\s+auto\s+rfp\s+busy\s+throughput\s+under\s+off\s+--sizes$`, out)
}

func TestExplainErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad sizes", []string{"explain", "testdata/kv.thrift", "--sizes", "12,x"}, `"x" is not a byte count`},
		{"bad cores", []string{"explain", "testdata/kv.thrift", "--cores", "0"}, "--cores"},
		{"bad hints", []string{"explain", "testdata/badhints.thrift"}, "badhints.thrift:2:19:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runHatgen(tc.args...)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, tc.want)
		})
	}
}

func TestGenerateLayout(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runHatgen("generate", "-o", dir, "--go-package", "example.com/gen",
		"../../internal/codegen/testdata/cases/includes/includes.thrift", "testdata/kv.thrift")
	require.Equal(t, 0, code, stderr)
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	}))
	assert.Equal(t, []string{
		"app/core/coreserver/includes.go", "app/core/includes-consts.go", "app/core/includes.go",
		"base/shared/shared-consts.go", "base/shared/shared.go",
		"kv/kv.go", "kv/kvserver/kv.go", "lib/proto/conflict.go", "plain/plain.go", "star/ns/star.go",
	}, files)
	src, err := os.ReadFile(filepath.Join(dir, "app/core/includes.go"))
	require.NoError(t, err)
	assert.Contains(t, string(src), `"example.com/gen/base/shared"`)
	assert.True(t, strings.HasPrefix(string(src), "// Code generated by hatgen. DO NOT EDIT.\n"))
}

func TestGenerateFailsOnErrors(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runHatgen("generate", "-o", dir, "testdata/badhints.thrift")
	assert.Equal(t, 1, code)
	assert.Regexp(t, diagLine, strings.Split(stderr, "\n")[0])
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing is written for a file with errors")
}
