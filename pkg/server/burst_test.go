package server_test

import (
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
