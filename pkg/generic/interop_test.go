package generic_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testutil"
)

func startGenericInterop(t *testing.T, opts ...server.Option) *testutil.Running {
	t.Helper()
	h := &interopHandler{}
	gs, err := generic.NewServer(interopIDL(), "Interop", h.handle)
	require.NoError(t, err)
	return testutil.StartServerWith(t, func(s *server.Server) { s.Register(gs) }, opts...)
}

// TestServerApacheGoClient: Apache's Go client, in both stacks, passes the
// whole interop suite against a generic server.
func TestServerApacheGoClient(t *testing.T) {
	r := startGenericInterop(t)
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			testutil.RunApacheClientSuite(t, testutil.DialApache(t, r.Addr, s))
		})
	}
}

// TestServerPythonClient: Apache's Python client passes every check of
// pyclient.py against a generic server.
func TestServerPythonClient(t *testing.T) {
	gen := testutil.GenPython(t)
	r := startGenericInterop(t)
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			assert.Equal(t, testutil.PyChecks, testutil.RunPython(t, gen, r.Addr, s))
		})
	}
}

// allTypesJSON is testutil.ApacheSample's kind of value: every type at an
// extreme, i64 beyond 2^53.
const allTypesJSON = `{"b":true,"i8v":-128,"i16v":32767,"i32v":-2147483648,"i64v":9223372036854775807,` +
	`"d":-1.5e300,"s":"héllo\u0000","bin":"AAH+/w==","color":"BLUE","ints":[1,-2,3],"strs":["a","b"],` +
	`"m":{"k":-9007199254740993},"inners":[{"id":1,"name":"one"},{"id":2,"name":""}],` +
	`"nested":{"-7":["x","y"],"7":[]},"opt":"set","inner":{"id":9,"name":"nine"},` +
	`"bools":[true,false,true],"byName":{"n":{"id":3,"name":"three"}}}`

// runClientSuite calls every Interop function through a generic client.
func runClientSuite(t *testing.T, c *generic.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	out, err := c.CallJSON(ctx, "ping", nil)
	require.NoError(t, err)
	assert.Equal(t, "null", string(out))

	out, err = c.CallJSON(ctx, "echoAll", []byte(`{"v":`+allTypesJSON+`}`))
	require.NoError(t, err)
	// Sets come back in any order; everything else exactly.
	var want, got map[string]any
	require.NoError(t, json.Unmarshal([]byte(allTypesJSON), &want))
	require.NoError(t, json.Unmarshal(out, &got))
	assert.ElementsMatch(t, want["strs"], got["strs"])
	delete(want, "strs")
	delete(got, "strs")
	assert.Equal(t, want, got)
	assert.Contains(t, string(out), `"i64v":9223372036854775807`, "i64 exact")
	assert.Contains(t, string(out), `"m":{"k":-9007199254740993}`, "i64 exact")

	out, err = c.CallJSON(ctx, "add", []byte(`{"a":1,"b":"9007199254740993"}`))
	require.NoError(t, err)
	assert.Equal(t, "9007199254740994", string(out))

	v, err := c.Call(ctx, "echoString", map[string]any{"s": "hi"})
	require.NoError(t, err)
	assert.Equal(t, "hi", v)

	v, err = c.Call(ctx, "echoBinary", map[string]any{"data": []byte{0, 1, 2}})
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 2}, v)

	v, err = c.Call(ctx, "mayFail", map[string]any{"code": 0})
	require.NoError(t, err)
	assert.Equal(t, int32(42), v)

	_, err = c.CallJSON(ctx, "mayFail", []byte(`{"code":1}`))
	var ex *generic.Exception
	require.True(t, errors.As(err, &ex), "%T %v", err, err)
	assert.Equal(t, "err", ex.Field)
	assert.Equal(t, "InteropError", ex.Type)
	assert.JSONEq(t, `{"code":1,"message":"boom"}`, string(ex.JSON))
	assert.Equal(t, map[string]any{"code": int32(1), "message": "boom"}, ex.Value)
	assert.Equal(t, `InteropError {"code":1,"message":"boom"}`, err.Error())

	_, err = c.CallJSON(ctx, "mayFail", []byte(`{"code":2}`))
	require.True(t, errors.As(err, &ex), "%T %v", err, err)
	assert.Equal(t, "OtherError", ex.Type)
	assert.JSONEq(t, `{"reason":"other"}`, string(ex.JSON))

	_, err = c.CallJSON(ctx, "mayFail", []byte(`{"code":3}`))
	var ae *proto.ApplicationException
	require.True(t, errors.As(err, &ae), "%T %v", err, err)
	assert.Equal(t, proto.ExcInternalError, ae.Type)

	for _, n := range []string{"n1", "n2"} {
		out, err = c.CallJSON(ctx, "notify", []byte(`{"msg":"`+n+`"}`))
		require.NoError(t, err)
		assert.Equal(t, "null", string(out))
	}
	var seen []any
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		v, err := c.Call(ctx, "drainNotes", nil)
		require.NoError(t, err)
		seen = append(seen, v.([]any)...)
		if len(seen) < 2 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	assert.ElementsMatch(t, []any{"n1", "n2"}, seen)

	_, err = c.CallJSON(ctx, "nope", nil)
	require.ErrorIs(t, err, generic.ErrNotFound)
}

func dialGeneric(t *testing.T, addr string, opts ...client.Option) *generic.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := client.Dial(ctx, addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return generic.NewClient(loadInterop(t), conn)
}

// TestClientApacheGoServer: a generic client finds the stack of Apache's Go
// server by itself and calls every function.
func TestClientApacheGoServer(t *testing.T) {
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			addr, _ := testutil.StartApacheServer(t, s)
			runClientSuite(t, dialGeneric(t, addr))
		})
	}
}

// TestClientPythonServer: the same against Apache's Python server.
func TestClientPythonServer(t *testing.T) {
	gen := testutil.GenPython(t)
	for _, s := range testutil.Stacks {
		t.Run(s.String(), func(t *testing.T) {
			runClientSuite(t, dialGeneric(t, testutil.StartPythonServer(t, gen, s)))
		})
	}
}

// TestClientHatServer: against the generated server over HatRPC framing,
// over THeader, and with a generic server on both ends.
func TestClientHatServer(t *testing.T) {
	r, _ := testutil.StartHatInterop(t)
	t.Run("hatrpc", func(t *testing.T) { runClientSuite(t, dialGeneric(t, r.Addr)) })
	t.Run("theader", func(t *testing.T) { runClientSuite(t, dialGeneric(t, r.Addr, client.WithTHeader())) })
	t.Run("compact-multiplexed", func(t *testing.T) {
		runClientSuite(t, dialGeneric(t, r.Addr, client.WithoutUpgrade(), client.WithCompact(), client.WithFramed(), client.WithMultiplexed()))
	})
	g := startGenericInterop(t)
	t.Run("generic-server", func(t *testing.T) { runClientSuite(t, dialGeneric(t, g.Addr)) })
}
