package idl_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/idl"
)

func TestRawGroups(t *testing.T) {
	pos := func(l, c int) idl.Pos { return idl.Pos{File: "a.thrift", Line: l, Col: c} }
	tests := []struct {
		side  idl.HintSide
		want  hints.RawSide
		kind  idl.HintValueKind
		wantK hints.ValueKind
	}{
		{idl.HintShared, hints.RawShared, idl.HintIdent, hints.ValueIdent},
		{idl.HintServer, hints.RawServer, idl.HintNumber, hints.ValueNumber},
		{idl.HintClient, hints.RawClient, idl.HintSize, hints.ValueSize},
		{idl.HintClient, hints.RawClient, idl.HintString, hints.ValueString},
	}
	for _, tc := range tests {
		in := []*idl.HintGroup{{Side: tc.side, Pos: pos(1, 2), Entries: []*idl.HintEntry{
			{Key: "app.k", Value: "v", Kind: tc.kind, Pos: pos(3, 4), ValuePos: pos(3, 10)},
		}}}
		out := idl.RawHintGroups(in)
		require.Len(t, out, 1)
		assert.Equal(t, tc.want, out[0].Side)
		assert.Equal(t, hints.Pos{File: "a.thrift", Line: 1, Col: 2}, out[0].Pos)
		require.Len(t, out[0].Entries, 1)
		e := out[0].Entries[0]
		assert.Equal(t, hints.RawEntry{Key: "app.k", Value: "v", Kind: tc.wantK,
			Pos: hints.Pos{File: "a.thrift", Line: 3, Col: 4}, ValuePos: hints.Pos{File: "a.thrift", Line: 3, Col: 10}}, e)
	}
}

func TestResolveHintsInheritedFunctions(t *testing.T) {
	prog, _, err := idl.ParseString("t.thrift", `
service P {
  hint: perf_goal=res_util;
  void a() [c_hint: timeout=1s;],
}
service C extends P {
  s_hint: polling=busy;
  void b(),
}
`)
	require.NoError(t, err)
	res, err := prog.Services[1].ResolveHints()
	require.NoError(t, err)
	require.Len(t, res.Functions, 2)
	a := res.Function("a")
	require.NotNil(t, a)
	assert.Equal(t, 1e9, float64(a.Client.Set.Timeout), "inherited functions keep their own hints")
	assert.Equal(t, hints.PollBusy, a.Server.Set.Polling, "and take the service-level hints of the child")
	assert.Equal(t, hints.Latency, a.Client.Set.PerfGoal, "the parent's service-level hints describe the parent service")
}
