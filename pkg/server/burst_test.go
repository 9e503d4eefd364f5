package server_test

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A burst of pipelined calls arriving in one read runs inline with the
// replies held back for one write; a slow call inside the burst must not
// keep the replies of the quick calls before it waiting. The slow call
// runs until the test cancels it after reading the quick replies, so a
// held reply shows as a read that never ends (the deadline), whatever
// the machine's load.
func TestBurstWithSlowCallDoesNotHoldQuickReplies(t *testing.T) {
	_, _, addr := start(t)
	nc, br := rawHat(t, addr)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(10*time.Second))))
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)

	var burst []byte
	frame := func(seq int32, args *wiretest.EchoArgs) { burst = appendEchoCall(t, codec, burst, seq, args) }
	for seq := int32(1); seq <= 5; seq++ {
		frame(seq, &wiretest.EchoArgs{Msg: "quick"})
	}
	frame(6, &wiretest.EchoArgs{Msg: "slow", Mode: wiretest.ModeWaitCtx})
	_, err := nc.Write(burst) // one write: the server reads the burst at once
	require.NoError(t, err)
	for range 5 {
		h, _, err := wire.ReadFrame(br, nil, 1<<20)
		require.NoError(t, err, "quick replies were held behind the slow call")
		require.Less(t, h.Seqid, int32(6), "a quick reply comes first")
	}
	cancel := make([]byte, wire.HeaderSize)
	wire.SealFrame(cancel, wire.KindCancel, 0, 6, 0)
	_, err = nc.Write(cancel)
	require.NoError(t, err)
	h, _, err := wire.ReadFrame(br, nil, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int32(6), h.Seqid)
	require.Equal(t, wire.KindException, h.Kind, "the cancelled call fails")
}

// appendEchoCall appends a framed echo call of seq to b, for tests that
// control how frames arrive (rawHat).
func appendEchoCall(t *testing.T, codec *wire.Codec, b []byte, seq int32, args *wiretest.EchoArgs) []byte {
	t.Helper()
	start := len(b)
	b = append(b, make([]byte, wire.HeaderSize)...)
	b, err := codec.AppendMessage(b, proto.Binary, "echo", proto.Call, seq, args)
	require.NoError(t, err)
	wire.SealFrame(b[start:], wire.KindCall, 0, seq, 0)
	return b
}

// burstStep writes frames (in one write, or cut at cut bytes into two
// with the replies of the frames before the cut read in between) and
// then reads the replies it expects, in any order: seqid to kind.
type burstStep struct {
	calls   []burstCall
	cancels []int32
	cut     int // 0: one write; else the first write's bytes, mid-frame
	before  int // with cut: how many replies to read after the first write
	want    map[int32]wire.Kind
}

type burstCall struct {
	seq  int32
	slow bool // blocks until cancelled (ModeWaitCtx)
}

func quickCalls(from, to int32) []burstCall {
	var cs []burstCall
	for seq := from; seq <= to; seq++ {
		cs = append(cs, burstCall{seq: seq})
	}
	return cs
}

func replies(kind wire.Kind, seqs ...int32) map[int32]wire.Kind {
	m := map[int32]wire.Kind{}
	for _, s := range seqs {
		m[s] = kind
	}
	return m
}

func seqRange(from, to int32) []int32 {
	var s []int32
	for seq := from; seq <= to; seq++ {
		s = append(s, seq)
	}
	return s
}

func merge(ms ...map[int32]wire.Kind) map[int32]wire.Kind {
	out := map[int32]wire.Kind{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestBurstCalls: pipelined calls arriving together (a burst the server
// runs inline, reusing one codec and request, its calls' contexts and
// header records carved from blocks, each listed for Cancel frames by
// seqid) each get their own answer: a Cancel frame inside a burst reaches
// its call, calls whose seqids share a place in the cancel table (a slow
// one still live there) are still found, and a burst cut mid-frame across
// two reads loses nothing. Slow calls run until cancelled, so nothing
// depends on timing.
func TestBurstCalls(t *testing.T) {
	const ring = 64 // the cancel table's ring (cancelRing)
	cases := []struct {
		name  string
		steps []burstStep
	}{
		{"a cancelled call inside a burst", []burstStep{{
			calls:   []burstCall{{seq: 1}, {seq: 2, slow: true}, {seq: 3}},
			cancels: []int32{2},
			want:    merge(replies(wire.KindReply, 1, 3), replies(wire.KindException, 2)),
		}, {
			calls: quickCalls(4, 20), // the connection goes on
			want:  replies(wire.KindReply, seqRange(4, 20)...),
		}}},
		{"seqids sharing a place with a live call", []burstStep{{
			calls: append([]burstCall{{seq: 1, slow: true}}, quickCalls(2, 2*ring+1)...),
			want:  replies(wire.KindReply, seqRange(2, 2*ring+1)...),
		}, {
			calls: []burstCall{{seq: 2*ring + 2, slow: true}, {seq: 3*ring + 1, slow: true}},
		}, {
			cancels: []int32{3*ring + 1, 1, 2*ring + 2},
			want:    replies(wire.KindException, 1, 2*ring+2, 3*ring+1),
		}}},
		{"a burst cut mid-frame", []burstStep{{
			calls:  quickCalls(1, 8),
			cut:    -1, // inside the fourth frame
			before: 3,
			want:   replies(wire.KindReply, seqRange(1, 8)...),
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, e, addr := start(t)
			nc, br := rawHat(t, addr)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(10*time.Second))))
			codec := wire.GetCodec()
			defer wire.PutCodec(codec)
			read := func(want map[int32]wire.Kind, n int) {
				t.Helper()
				for range n {
					h, _, err := wire.ReadFrame(br, nil, 1<<20)
					require.NoError(t, err)
					kind, ok := want[h.Seqid]
					require.True(t, ok, "unexpected reply to %d", h.Seqid)
					require.Equal(t, kind, h.Kind, "reply to %d", h.Seqid)
					delete(want, h.Seqid)
				}
			}
			for _, st := range tc.steps {
				var b []byte
				var ends []int
				slow := 0
				for _, c := range st.calls {
					args := &wiretest.EchoArgs{Msg: "quick"}
					if c.slow {
						args = &wiretest.EchoArgs{Msg: "slow", Mode: wiretest.ModeWaitCtx}
						slow++
					}
					b = appendEchoCall(t, codec, b, c.seq, args)
					ends = append(ends, len(b))
				}
				for _, seq := range st.cancels {
					f := make([]byte, wire.HeaderSize)
					wire.SealFrame(f, wire.KindCancel, 0, seq, 0)
					b = append(b, f...)
				}
				want := maps.Clone(st.want)
				if st.cut != 0 {
					cut := ends[2] + (ends[3]-ends[2])/2
					_, err := nc.Write(b[:cut])
					require.NoError(t, err)
					read(want, st.before)
					b = b[cut:]
				}
				_, err := nc.Write(b)
				require.NoError(t, err)
				for range slow { // the slow calls run before anything cancels them
					select {
					case <-e.Waiting:
					case <-time.After(testenv.HangGuard(10 * time.Second)):
						t.Fatal("a slow call did not start")
					}
				}
				read(want, len(want))
				require.Empty(t, want)
			}
		})
	}
}
