package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/testcert"
	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// TestCallHatKV: Put, Get and Scan on a running hatkv, a declared
// exception readable and as JSON, bad arguments refused with their path.
func TestCallHatKV(t *testing.T) {
	addr := startHatKV(t)
	kv := func(args ...string) (int, string, string) {
		return hatrpc(t, append([]string{"call", "--idl", hatkvIDL, addr}, args...)...)
	}
	code, out, errOut := kv("HatKV.Put", `{"key":"user1","fields":{"field0":"aGVsbG8=","field1":"d29ybGQ="}}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "null\n", out)
	code, out, errOut = kv("HatKV.Put", `{"key":"user2","fields":{"field0":"AA=="}}`)
	require.Equal(t, 0, code, errOut)

	code, out, errOut = kv("HatKV.Get", `{"key":"user1"}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "{\n  \"field0\": \"aGVsbG8=\",\n  \"field1\": \"d29ybGQ=\"\n}\n", out)

	code, out, errOut = kv("--json", "HatKV.Get", `{"key":"user1","fields":["field1"]}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `{"field1":"d29ybGQ="}`+"\n", out)

	code, out, errOut = kv("--json", "HatKV.Scan", `{"start_key":"user","count":10}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `[{"key":"user1","record":{"field0":"aGVsbG8=","field1":"d29ybGQ="}},{"key":"user2","record":{"field0":"AA=="}}]`+"\n", out)

	code, out, errOut = kv("HatKV.Get", `{"key":"nope"}`)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "hatrpc: HatKV.Get threw NotFound (missing):\n{\n  \"message\": \"key \\\"nope\\\" not found\",\n  \"key\": \"nope\"\n}\n", errOut)

	code, out, _ = kv("--json", "HatKV.Get", `{"key":"nope"}`)
	assert.Equal(t, 1, code)
	assert.JSONEq(t, `{"exception":"NotFound","field":"missing","value":{"message":"key \"nope\" not found","key":"nope"}}`, out)

	code, _, errOut = kv("HatKV.Scan", `{"start_key":"user","count":"ten"}`)
	assert.Equal(t, 1, code)
	assert.Equal(t, "hatrpc: bad arguments: args.count: want i32, got string \"ten\"\n", errOut)

	code, out, errOut = kv("--json", "HatKV.Stats")
	require.Equal(t, 0, code, errOut)
	var stats map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &stats))
	assert.EqualValues(t, 2, stats["records"])
}

// TestCallFB303: hatkv's fb303 service on the same port.
func TestCallFB303(t *testing.T) {
	addr := startHatKV(t)
	code, out, errOut := hatrpc(t, "call", "--idl", fb303IDL, addr, "FacebookService.getStatus")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "\"ALIVE\"\n", out)

	code, out, errOut = hatrpc(t, "call", "--json", "--idl", fb303IDL, addr, "FacebookService.getCounters")
	require.Equal(t, 0, code, errOut)
	var counters map[string]int64
	require.NoError(t, json.Unmarshal([]byte(out), &counters), out)
	assert.Contains(t, counters, "hatrpc_server_connections")

	code, out, errOut = hatrpc(t, "call", "--idl", fb303IDL, addr, "FacebookService.getName")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "\"hatkv\"\n", out)
}

// TestCallFastPath: with --rdma on the transport a hatkv server offers,
// the call runs on it.
func TestCallFastPath(t *testing.T) {
	tr := fastpathtest.Transport()
	addr := startHatKV(t, hatkv.WithTransport(tr))
	code, out, errOut := hatrpc(t, "call", "-v", "--rdma", tr, "--idl", hatkvIDL, addr, "HatKV.Put", `{"key":"k","fields":{"f":""}}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "null\n", out)
	assert.Equal(t, "hatrpc: HatKV.Put over HatRPC framing, transport "+tr+"\n", errOut)

	code, _, errOut = hatrpc(t, "call", "-v", "--rdma", "off", "--idl", hatkvIDL, addr, "HatKV.Put", `{"key":"k","fields":{"g":"AA=="}}`)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "hatrpc: HatKV.Put over HatRPC framing, transport tcp\n", errOut)
}

// TestCallTLS: --tls-ca against hatkv with TLS; without TLS the handshake
// fails readably.
func TestCallTLS(t *testing.T) {
	certs := testcert.Write(t, t.TempDir(), "hatrpc")
	cfg, err := hatkv.ServerTLS(certs.Cert, certs.Key, "")
	require.NoError(t, err)
	addr := startHatKV(t, hatkv.WithTLS(cfg))
	code, out, errOut := hatrpc(t, "call", "--tls-ca", certs.CA, "--idl", fb303IDL, addr, "FacebookService.getStatus")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "\"ALIVE\"\n", out)

	other := testcert.Write(t, t.TempDir(), "other")
	code, _, errOut = hatrpc(t, "call", "--timeout", "20s", "--tls-ca", other.CA, "--idl", fb303IDL, addr, "FacebookService.getStatus")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "TLS handshake: tls: failed to verify certificate")

	code, out, errOut = hatrpc(t, "call", "--tls-insecure", "--idl", fb303IDL, addr, "FacebookService.getStatus")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "\"ALIVE\"\n", out)
}

// TestCallApacheGo: Apache's Go server in both stacks, detected and given
// by flags; the undeclared error and a declared exception.
func TestCallApacheGo(t *testing.T) {
	idl := filepath.Join(testutil.TestdataDir(), "interop.thrift")
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			addr, _ := testutil.StartApacheServer(t, s)
			code, out, errOut := hatrpc(t, "call", "--json", "--idl", idl, addr, "Interop.add", `{"a":2,"b":9007199254740993}`)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "9007199254740995\n", out)

			flags := []string{"--framed", "--protocol", "binary"}
			if s.Framing == testutil.Buffered {
				flags = []string{"--unframed", "--protocol", "compact"}
			}
			code, out, errOut = hatrpc(t, append(append([]string{"call", "--json", "--idl", idl}, flags...),
				addr, "Interop.echoAll", `{"v":{"color":"GREEN","ints":[1,2],"nested":{"3":["x"]},"inner":{"id":1}}}`)...)
			require.Equal(t, 0, code, errOut)
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			assert.Equal(t, "GREEN", got["color"])
			assert.Equal(t, map[string]any{"3": []any{"x"}}, got["nested"])

			code, _, errOut = hatrpc(t, "call", "--idl", idl, addr, "Interop.mayFail", `{"code":1}`)
			assert.Equal(t, 1, code)
			assert.Equal(t, "hatrpc: Interop.mayFail threw InteropError (err):\n{\n  \"code\": 1,\n  \"message\": \"boom\"\n}\n", errOut)

			code, _, errOut = hatrpc(t, "call", "--idl", idl, addr, "Interop.mayFail", `{"code":3}`)
			assert.Equal(t, 1, code)
			assert.Equal(t, "hatrpc: Interop.mayFail failed on the server (internal_error): Internal error processing mayFail: undeclared failure\n", errOut)
		})
	}
}

// TestCallPython: Apache's Python server.
func TestCallPython(t *testing.T) {
	gen := testutil.GenPython(t)
	idl := filepath.Join(testutil.TestdataDir(), "interop.thrift")
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			addr := testutil.StartPythonServer(t, gen, s)
			code, out, errOut := hatrpc(t, "call", "--idl", idl, addr, "Interop.echoString", `{"s":"héllo"}`)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "\"héllo\"\n", out)

			code, out, errOut = hatrpc(t, "call", "--json", "--idl", idl, addr, "Interop.echoBinary", `{"data":"AAEC"}`)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "\"AAEC\"\n", out)

			code, _, errOut = hatrpc(t, "call", "--idl", idl, addr, "Interop.mayFail", `{"code":2}`)
			assert.Equal(t, 1, code)
			assert.Equal(t, "hatrpc: Interop.mayFail threw OtherError (other):\n{\n  \"reason\": \"other\"\n}\n", errOut)
		})
	}
}

// TestCallHeaders: --header reaches the handler over HatRPC framing and
// over THeader.
func TestCallHeaders(t *testing.T) {
	d, err := generic.Load(echoIDL)
	require.NoError(t, err)
	svc, err := d.Service("Echo")
	require.NoError(t, err)
	h := func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		return json.Marshal(md["tenant"] + "/" + md["x-two"])
	}
	r := testutil.StartServerWith(t, func(s *server.Server) { s.Register(svc.Server(h)) })
	for _, extra := range [][]string{nil, {"--theader"}} {
		args := append([]string{"call", "--idl", echoIDL, "-H", "tenant=t1", "--header", "x-two=a=b"}, extra...)
		code, out, errOut := hatrpc(t, append(args, r.Addr, "Echo.echo", `{"msg":"m"}`)...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "\"t1/a=b\"\n", out)
	}
}

// TestCallErrors: what a person sees when something is wrong.
func TestCallErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	addr := startHatKV(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"refused", []string{"--idl", hatkvIDL, closed, "HatKV.Get", `{"key":"k"}`},
			"hatrpc: cannot connect to " + closed + ": connection refused (is the server running?)\n"},
		{"no such function in the IDL", []string{"--idl", hatkvIDL, addr, "HatKV.get"},
			"hatrpc: no function \"HatKV.get\" (have Get, Put, Delete, MultiGet, MultiPut, Scan, ScanStream, Stats)\n"},
		{"no such service", []string{"--idl", hatkvIDL, addr, "KV.Get"},
			"hatrpc: no service \"KV\" (have HatKV)\n"},
		{"not served", []string{"--idl", echoIDL, addr, "Echo.echo", `{"msg":"x"}`},
			"hatrpc: the server at " + addr + " has no function Echo.echo (unknown method Echo:echo); is it serving this IDL (a multiplexed Apache server needs --multiplexed)?\n"},
		{"bad JSON", []string{"--idl", hatkvIDL, addr, "HatKV.Get", `{"key":`},
			"hatrpc: bad arguments: args: invalid JSON: unexpected EOF\n"},
		{"target", []string{"--idl", hatkvIDL, addr, "Get"},
			"hatrpc: \"Get\": want Service.function\n"},
		{"idl", []string{"--idl", "nope.thrift", addr, "A.b"},
			"hatrpc: nope.thrift:1:1: cannot read file: no such file\n"},
		{"protocol", []string{"--protocol", "json", "--idl", hatkvIDL, addr, "HatKV.Stats"},
			"hatrpc: --protocol \"json\": want binary or compact\n"},
		{"header", []string{"-H", "novalue", "--idl", hatkvIDL, addr, "HatKV.Stats"},
			"hatrpc: --header \"novalue\": want key=value\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := hatrpc(t, append([]string{"call"}, tt.args...)...)
			assert.Equal(t, 1, code)
			assert.Empty(t, out)
			assert.Equal(t, tt.want, errOut)
		})
	}
	assert.True(t, errors.Is(&callError{err: generic.ErrNotFound}, generic.ErrNotFound))
}
