package testutil

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ai "github.com/hatrpc/hatrpc/test/apachegen/interop"
)

// CallTimeout bounds every single call of the suites; the 16 MiB echo under
// -race on a loaded 2-core machine is the slowest one.
const CallTimeout = 60 * time.Second

// BigPayload is the 16 MiB binary of the acceptance criteria, with a
// pattern that catches shifted or truncated copies.
func BigPayload() []byte {
	b := make([]byte, 16<<20)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// ApacheSample is the value every echoAll check sends: extremes of every
// base type, non-ASCII text, every container shape and nesting.
func ApacheSample() *ai.AllTypes {
	opt := "present"
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	return &ai.AllTypes{
		B:      true,
		I8v:    -128,
		I16v:   -32768,
		I32v:   -2147483648,
		I64v:   9223372036854775807,
		D:      -1.5e300,
		S:      "héllo, wörld ✓",
		Bin:    bin,
		Color:  ai.Color_BLUE,
		Ints:   []int32{0, -1, 1, 2147483647},
		Strs:   []string{"a", "b", ""},
		M:      map[string]int64{"x": -1, "y": 1 << 40},
		Inners: []*ai.Inner{{ID: 1, Name: "one"}, {ID: 2, Name: "two"}},
		Nested: map[int32][]string{7: {"p", "q"}, -7: {}},
		Opt:    &opt,
		Inner:  &ai.Inner{ID: 3, Name: "three"},
		Bools:  []bool{true, false, true},
		ByName: map[string]*ai.Inner{"k": {ID: 4, Name: "four"}},
	}
}

// AssertApacheAllTypes compares two AllTypes, treating the set field as
// unordered (a set has no order on the wire contract).
func AssertApacheAllTypes(t testing.TB, want, got *ai.AllTypes) {
	t.Helper()
	require.NotNil(t, got)
	w, g := *want, *got
	assert.ElementsMatch(t, w.Strs, g.Strs, "set<string>")
	w.Strs, g.Strs = nil, nil
	assert.True(t, w.Equals(&g), "AllTypes mismatch:\nwant %v\n got %v", &w, &g)
}

func callCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	t.Cleanup(cancel)
	return ctx
}

// RunApacheClientSuite drives every Interop method through an Apache Go
// client against whatever server c is connected to.
func RunApacheClientSuite(t *testing.T, c *ai.InteropClient) {
	ctx := callCtx(t)

	t.Run("ping", func(t *testing.T) { require.NoError(t, c.Ping(ctx)) })

	t.Run("echoAll", func(t *testing.T) {
		want := ApacheSample()
		got, err := c.EchoAll(ctx, want)
		require.NoError(t, err)
		AssertApacheAllTypes(t, want, got)

		sparse := &ai.AllTypes{I32v: 5}
		got, err = c.EchoAll(ctx, sparse)
		require.NoError(t, err)
		assert.Equal(t, int32(5), got.I32v)
		assert.Nil(t, got.Opt, "unset optional must stay unset")
	})

	runScalarSuite(t, ctx, c)

	t.Run("exceptions", func(t *testing.T) {
		v, err := c.MayFail(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, int32(42), v)

		_, err = c.MayFail(ctx, 1)
		var ie *ai.InteropError
		require.True(t, errors.As(err, &ie), "want InteropError, got %T %v", err, err)
		assert.Equal(t, int32(1), ie.Code)
		assert.Equal(t, "boom", ie.Message)

		_, err = c.MayFail(ctx, 2)
		var oe *ai.OtherError
		require.True(t, errors.As(err, &oe), "want OtherError, got %T %v", err, err)
		assert.Equal(t, "other", oe.Reason)

		_, err = c.MayFail(ctx, 3)
		var ae thrift.TApplicationException
		require.True(t, errors.As(err, &ae), "want TApplicationException, got %T %v", err, err)
		assert.Equal(t, int32(thrift.INTERNAL_ERROR), ae.TypeId())

		got, err := c.Add(ctx, 1, 1)
		require.NoError(t, err, "connection must survive exceptions")
		assert.Equal(t, int64(2), got)
	})

	t.Run("oneway", func(t *testing.T) {
		sent := []string{"n1", "n2", "n3"}
		for _, n := range sent {
			require.NoError(t, c.Notify(ctx, n))
		}
		// Oneway calls may run concurrently with later calls, so poll.
		var seen []string
		deadline := time.Now().Add(10 * time.Second)
		for len(seen) < len(sent) && time.Now().Before(deadline) {
			got, err := c.DrainNotes(ctx)
			require.NoError(t, err)
			seen = append(seen, got...)
			if len(seen) < len(sent) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		sort.Strings(seen)
		assert.Equal(t, sent, seen)
	})
}
