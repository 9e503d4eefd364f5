package server_test

import (
	"bufio"
	"net"
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
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(10*time.Second))))
	br := bufio.NewReader(nc)
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)

	hello := &wire.Hello{Version: wire.Version, Caps: wire.CapFraming, MaxFrame: 1 << 20}
	msg, err := codec.AppendMessage(nil, proto.Binary, wire.HelloMethod, proto.Call, 0, hello)
	require.NoError(t, err)
	_, err = nc.Write(msg)
	require.NoError(t, err)
	rep, err := wire.ReadMessage(br, wire.Format{Proto: proto.Binary}, nil, nil)
	require.NoError(t, err)
	mh, err := wire.ParseMsgHeader(proto.Binary, rep)
	require.NoError(t, err)
	require.Equal(t, proto.Reply, mh.Type)

	var burst []byte
	frame := func(seq int32, args *wiretest.EchoArgs) {
		start := len(burst)
		burst = append(burst, make([]byte, wire.HeaderSize)...)
		burst, err = codec.AppendMessage(burst, proto.Binary, "echo", proto.Call, seq, args)
		require.NoError(t, err)
		wire.SealFrame(burst[start:], wire.KindCall, 0, seq, 0)
	}
	for seq := int32(1); seq <= 5; seq++ {
		frame(seq, &wiretest.EchoArgs{Msg: "quick"})
	}
	frame(6, &wiretest.EchoArgs{Msg: "slow", Mode: wiretest.ModeWaitCtx})
	_, err = nc.Write(burst) // one write: the server reads the burst at once
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
