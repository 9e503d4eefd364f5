package testutil

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	hg "github.com/hatrpc/hatrpc/test/gen/interop"
)

// HatSample is ApacheSample in the hatgen-generated types.
func HatSample() *hg.AllTypes {
	opt := "present"
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	return &hg.AllTypes{
		B:      true,
		I8v:    -128,
		I16v:   -32768,
		I32v:   -2147483648,
		I64v:   9223372036854775807,
		D:      -1.5e300,
		S:      "héllo, wörld ✓",
		Bin:    bin,
		Color:  hg.Color_BLUE,
		Ints:   []int32{0, -1, 1, 2147483647},
		Strs:   []string{"a", "b", ""},
		M:      map[string]int64{"x": -1, "y": 1 << 40},
		Inners: []*hg.Inner{{ID: 1, Name: "one"}, {ID: 2, Name: "two"}},
		Nested: map[int32][]string{7: {"p", "q"}, -7: {}},
		Opt:    &opt,
		Inner:  &hg.Inner{ID: 3, Name: "three"},
		Bools:  []bool{true, false, true},
		ByName: map[string]*hg.Inner{"k": {ID: 4, Name: "four"}},
	}
}

// AssertHatAllTypes compares two AllTypes field by field, the set as
// unordered and nil and empty containers as equal (the wire cannot tell).
func AssertHatAllTypes(t testing.TB, want, got *hg.AllTypes) {
	t.Helper()
	require.NotNil(t, got)
	assert.Equal(t, want.B, got.B)
	assert.Equal(t, want.I8v, got.I8v)
	assert.Equal(t, want.I16v, got.I16v)
	assert.Equal(t, want.I32v, got.I32v)
	assert.Equal(t, want.I64v, got.I64v)
	assert.Equal(t, want.D, got.D)
	assert.Equal(t, want.S, got.S)
	assert.Equal(t, string(want.Bin), string(got.Bin))
	assert.Equal(t, want.Color, got.Color)
	assert.Equal(t, len(want.Ints), len(got.Ints))
	if len(want.Ints) > 0 {
		assert.Equal(t, want.Ints, got.Ints)
	}
	assert.ElementsMatch(t, want.Strs, got.Strs, "set<string>")
	assert.Equal(t, len(want.M), len(got.M))
	for k, v := range want.M {
		assert.Equal(t, v, got.M[k], "m[%q]", k)
	}
	assert.Equal(t, want.Inners, got.Inners)
	assert.Equal(t, len(want.Nested), len(got.Nested))
	for k, v := range want.Nested {
		assert.Equal(t, len(v), len(got.Nested[k]), "nested[%d]", k)
		if len(v) > 0 {
			assert.Equal(t, v, got.Nested[k])
		}
	}
	assert.Equal(t, want.Opt, got.Opt)
	assert.Equal(t, want.Inner, got.Inner)
	assert.Equal(t, want.Bools, got.Bools)
	assert.Equal(t, want.ByName, got.ByName)
}

// RunHatClientSuite is RunApacheClientSuite through the hatgen-generated
// client.
func RunHatClientSuite(t *testing.T, c *hg.InteropClient) {
	ctx := callCtx(t)

	t.Run("ping", func(t *testing.T) { require.NoError(t, c.Ping(ctx)) })

	t.Run("echoAll", func(t *testing.T) {
		want := HatSample()
		got, err := c.EchoAll(ctx, want)
		require.NoError(t, err)
		AssertHatAllTypes(t, want, got)

		got, err = c.EchoAll(ctx, &hg.AllTypes{I32v: 5})
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
		var ie *hg.InteropError
		require.True(t, errors.As(err, &ie), "want InteropError, got %T %v", err, err)
		assert.Equal(t, int32(1), ie.Code)
		assert.Equal(t, "boom", ie.Message)

		_, err = c.MayFail(ctx, 2)
		var oe *hg.OtherError
		require.True(t, errors.As(err, &oe), "want OtherError, got %T %v", err, err)
		assert.Equal(t, "other", oe.Reason)

		_, err = c.MayFail(ctx, 3)
		var ae *proto.ApplicationException
		require.True(t, errors.As(err, &ae), "want ApplicationException, got %T %v", err, err)
		assert.Equal(t, proto.ExcInternalError, ae.Type)

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
