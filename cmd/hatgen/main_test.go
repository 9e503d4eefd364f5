package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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
		{"streaming misuse", "testdata/badstream.thrift", 1, []string{
			`testdata/badstream.thrift:4:23: unknown streaming.mode "sever" on function S.a: want "server", "client" or "bidirectional"`,
			`testdata/badstream.thrift:5:3: streaming function S.b must return a struct, not void: the server's messages are that struct`,
			`testdata/badstream.thrift:6:13: streaming function S.c: argument "q" has type string, not a struct: the client's messages must be a struct`,
			`testdata/badstream.thrift:7:30: oneway function S.d cannot stream: a stream has replies (streaming.mode="bidirectional")`,
			`testdata/badstream.thrift:8:58: hint "idempotent" does not apply to streaming function S.e: a stream is never retried or hedged`,
			`testdata/badstream.thrift:9:30: hint "stream_window" applies to streaming functions only: S.f is not one (declare it with streaming.mode)`,
		}},
		{"streaming window values", "testdata/badwindow.thrift", 1, []string{
			`testdata/badwindow.thrift:5:74: bad value "100" for stream_window: must be at least 1KiB`,
			`testdata/badwindow.thrift:6:74: bad value "2GiB" for stream_window: must be at most 1GiB`,
			`testdata/badwindow.thrift:7:74: bad value "big" for stream_window: want a size like 512, 4KB, 4KiB, 1MB`,
		}},
		{"streams", "../../examples/stream/logs.thrift", 0, nil},
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
				if strings.HasPrefix(tc.name, "streaming") {
					assert.Equal(t, want, lines[i]) // exact text
				}
				assert.Contains(t, lines[i], want)
				if tc.name != "missing file" {
					assert.Regexp(t, diagLine, lines[i])
				}
			}
		})
	}
}

type explained struct {
	Service  string `json:"service"`
	Function string `json:"function"`
	Side     string `json:"side"`
	Table    struct {
		Transport string `json:"transport"`
		Provider  string `json:"provider"`
		Polling   string `json:"polling"`
		Rows      []struct {
			Min      int    `json:"min"`
			Max      int    `json:"max"`
			Route    string `json:"route"`
			Protocol string `json:"protocol"`
		} `json:"rows"`
	} `json:"table"`
	At []struct {
		Size int `json:"size"`
		Row  struct {
			Protocol string `json:"protocol"`
		} `json:"row"`
	} `json:"at"`
	Hints []struct {
		Key, Value, Origin string
	} `json:"hints"`
}

func TestExplainJSON(t *testing.T) {
	code, out, stderr := runHatgen("explain", "testdata/kv.thrift", "--cores", "4", "--provider", "ibv", "--sizes", "512,131072", "--json")
	require.Equal(t, 0, code, stderr)
	var sides []explained
	require.NoError(t, json.Unmarshal([]byte(out), &sides))
	var raw []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, r := range raw {
		for _, k := range []string{"service", "function", "side", "table", "at", "hints"} {
			assert.Contains(t, r, k)
		}
	}
	type key struct{ fn, side string }
	got := map[key]explained{}
	var keys []string
	for _, s := range sides {
		assert.Equal(t, "KV", s.Service)
		got[key{s.Function, s.Side}] = s
		keys = append(keys, s.Function+"/"+s.Side)
	}
	sort.Strings(keys)
	assert.Equal(t, []string{"get/client", "get/server", "put/client", "put/server"}, keys)
	tests := []struct {
		k                  key
		protocol, polling  string
		originKey, fromPos string
	}{
		{key{"get", "client"}, "direct_write_imm", "busy", "payload_size", "kv.thrift:6:38"},
		{key{"get", "server"}, "direct_write_imm", "event", "polling", "kv.thrift:5:11"},
		{key{"put", "client"}, "rfp", "busy", "protocol", "kv.thrift:7:53"},
		{key{"put", "client"}, "rfp", "busy", "app.tag", "kv.thrift:7:67"},
		{key{"put", "server"}, "direct_write_imm", "event", "perf_goal", "kv.thrift:4:9"},
	}
	for _, tc := range tests {
		s, ok := got[tc.k]
		require.True(t, ok, "%v", tc.k)
		assert.Equal(t, "rdma", s.Table.Transport)
		assert.Equal(t, "ibv", s.Table.Provider)
		assert.Equal(t, tc.polling, s.Table.Polling, "%v", tc.k)
		require.NotEmpty(t, s.Table.Rows)
		assert.Equal(t, 0, s.Table.Rows[0].Min)
		for _, r := range s.Table.Rows {
			assert.Equal(t, "lane", r.Route, "%v", tc.k)
			assert.Equal(t, tc.protocol, r.Protocol, "%v", tc.k)
		}
		require.Len(t, s.At, 2)
		assert.Equal(t, 131072, s.At[1].Size)
		assert.Equal(t, tc.protocol, s.At[1].Row.Protocol)
		found := false
		for _, h := range s.Hints {
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
		"goal=throughput subscription=under(1/4 cores) transport=shm (shm) polling=busy",
		"SIZE", "ROUTE", "PROTOCOL", "POLLING", "INLINE",
		"adapts rfp_server_reply: 5 fetches (rfp_retries) find no response",
	} {
		assert.Contains(t, out, want)
	}
	assert.Regexp(t, `(?m)^  0-128\s+lane\s+direct_write_imm\s+busy\s+yes$`, out)
	assert.Regexp(t, `(?m)^  129-\.\.\.\s+lane\s+rfp\s+busy\s+no$`, out)
}

// TestExplainProviders: --provider picks the fast path the tables are for
// (shm's design space differs from ibv's for large throughput messages),
// off plans TCP, and --concurrency overrides the hints.
func TestExplainProviders(t *testing.T) {
	const file = "../../examples/echo/echo.thrift"
	_, shm, _ := runHatgen("explain", file, "--cores", "2", "--provider", "shm")
	assert.Regexp(t, `(?m)^  4097-\.\.\.\s+lane\s+read_rndv\s+event\s+no$`, shm)
	_, ibv, _ := runHatgen("explain", file, "--cores", "2", "--provider", "ibv")
	assert.Regexp(t, `(?m)^  4097-\.\.\.\s+lane\s+rfp\s+event\s+no$`, ibv)
	assert.Contains(t, ibv, "transport=rdma (ibv)")
	_, off, _ := runHatgen("explain", file, "--cores", "2", "--provider", "off")
	assert.Regexp(t, `(?m)^  0-\.\.\.\s+tcp\s+-\s+busy\s+no$`, off)
	assert.NotContains(t, off, "adapts")
	_, conc, _ := runHatgen("explain", file, "--cores", "2", "--concurrency", "2")
	assert.Contains(t, conc, "goal=latency subscription=full(2/2 cores)")
}

// TestExplainStreams: a streaming function's plan says its mode, in the
// table and in JSON; unary functions say none.
func TestExplainStreams(t *testing.T) {
	const file = "../../examples/stream/logs.thrift"
	code, out, stderr := runHatgen("explain", file, "--cores", "2")
	require.Equal(t, 0, code, stderr)
	for _, fn := range []string{"tail (client)", "tail (server)", "upload (client)", "upload (server)", "chat (client)", "chat (server)"} {
		mode := map[string]string{"tail": "server", "upload": "client", "chat": "bidirectional"}[strings.Fields(fn)[0]]
		assert.Contains(t, out, "Logs."+fn+"\n  stream="+mode+"\n")
	}
	assert.Regexp(t, `(?m)^Logs\.count \(client\)\n  perf_goal`, out, "a unary function has no stream line")
	// tail's c_hint stream_window: the client's side shows it, the
	// server's (no s_hint) the connection's window, no line.
	assert.Equal(t, 1, strings.Count(out, "stream_window=256KiB (2048 messages) per stream\n"), out)
	assert.Contains(t, out, "stream_window=256KiB  ../../examples/stream/logs.thrift:49:104 (function c_hint)")

	code, out, stderr = runHatgen("explain", file, "--cores", "2", "--json")
	require.Equal(t, 0, code, stderr)
	var sides []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &sides))
	got := map[string]any{}
	windows := map[string]any{}
	for _, s := range sides {
		got[s["function"].(string)+"/"+s["side"].(string)] = s["stream"]
		if w, ok := s["table"].(map[string]any)["stream_window"]; ok {
			windows[s["function"].(string)+"/"+s["side"].(string)] = w
		}
	}
	assert.Equal(t, map[string]any{"tail/client": float64(256 << 10)}, windows)
	assert.Equal(t, map[string]any{
		"tail/client": "server", "tail/server": "server", "upload/client": "client", "upload/server": "client",
		"chat/client": "bidirectional", "chat/server": "bidirectional", "count/client": nil, "count/server": nil,
	}, got)

	// Where the fast path is granted every stream takes lanes (never
	// FLOCK): one for a server stream, two for a client or bidirectional
	// one.
	code, out, stderr = runHatgen("explain", file, "--cores", "2", "--provider", "shm", "--json")
	require.Equal(t, 0, code, stderr)
	sides = nil
	require.NoError(t, json.Unmarshal([]byte(out), &sides))
	routes := map[string]any{}
	for _, s := range sides {
		tab := s["table"].(map[string]any)
		routes[s["function"].(string)+"/"+s["side"].(string)] = fmt.Sprint(tab["transport"], " ", tab["rows"].([]any)[0].(map[string]any)["route"])
	}
	assert.Equal(t, map[string]any{
		"tail/client": "shm lane", "tail/server": "shm lane", "upload/client": "shm lane", "upload/server": "shm lane",
		"chat/client": "shm lane", "chat/server": "shm lane", "count/client": "shm lane", "count/server": "shm lane",
	}, routes)
}

// TestExplainStreamBatch: the client table of a client or bidirectional
// stream lists what its lanes' requests (batches of its frames) go by:
// the lane rows up to the server's pre-known buffer (64 KiB, or the
// declared payload plus 1 KiB), read_rndv past it, on shm and ibv, in
// the text and in JSON; no other table has batch rows.
func TestExplainStreamBatch(t *testing.T) {
	const file = "../../examples/stream/logs.thrift"
	for _, prov := range []string{"shm", "ibv"} {
		t.Run(prov, func(t *testing.T) {
			code, out, stderr := runHatgen("explain", file, "--cores", "2", "--provider", prov)
			require.Equal(t, 0, code, stderr)
			assert.Equal(t, 2, strings.Count(out, "  stream batch rows (the stream's requests: this side's frames, batched):\n"), out)
			for _, fn := range []string{"upload", "chat"} {
				i := strings.Index(out, "Logs."+fn+" (client)\n")
				require.GreaterOrEqual(t, i, 0, fn)
				side := out[i:]
				side = side[:strings.Index(side, "\n\n")]
				last := map[string]string{"upload": "66561", "chat": "65537"}[fn]
				assert.Regexp(t, `(?m)^    0-128\s+lane\s+direct_write_imm\s+busy\s+yes$`, side, fn)
				assert.Regexp(t, `(?m)^    `+last+`-\.\.\.\s+lane\s+read_rndv\s+busy\s+no$`, side, fn)
			}

			code, out, stderr = runHatgen("explain", file, "--cores", "2", "--provider", prov, "--json")
			require.Equal(t, 0, code, stderr)
			var sides []map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &sides))
			got := map[string]string{}
			for _, s := range sides {
				rows, ok := s["table"].(map[string]any)["stream_batch"].([]any)
				if !ok {
					continue
				}
				last := rows[len(rows)-1].(map[string]any)
				got[s["function"].(string)+"/"+s["side"].(string)] = fmt.Sprint(last["min"], " ", last["route"], " ", last["protocol"])
			}
			assert.Equal(t, map[string]string{"upload/client": "66561 lane read_rndv", "chat/client": "65537 lane read_rndv"}, got)
		})
	}
}

func TestExplainErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad sizes", []string{"explain", "testdata/kv.thrift", "--sizes", "12,x"}, `"x" is not a byte count`},
		{"bad cores", []string{"explain", "testdata/kv.thrift", "--cores", "0"}, "--cores"},
		{"bad concurrency", []string{"explain", "testdata/kv.thrift", "--concurrency", "-1"}, "--concurrency"},
		{"bad provider", []string{"explain", "testdata/kv.thrift", "--provider", "verbs"}, `--provider: "verbs" is none of shm, ibv, off`},
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
