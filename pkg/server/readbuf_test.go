package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// Bursts of pipelined 4 KiB calls, each burst written at once and larger
// than the big read buffer, make the connection's read buffer grow in the
// middle of a burst; every call still gets its own payload back,
// across the swap and after it.
func TestDeepBurstGrowsReadBufferKeepingBytes(t *testing.T) {
	s, _, addr := start(t)
	nc, br := rawHat(t, addr)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(20*time.Second))))
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)

	payload := func(seq int32) string {
		return fmt.Sprintf("%06d", seq) + strings.Repeat(string(rune('a'+seq%26)), 4<<10)
	}
	const perBurst = 3 * server.BigReadBufSize / (4 << 10) // three big buffers' worth
	seq := int32(0)
	for burst := range 2 {
		var b []byte
		first := seq + 1
		for range perBurst {
			seq++
			b = appendEchoCall(t, codec, b, seq, &wiretest.EchoArgs{Msg: payload(seq)})
		}
		// Written by another goroutine: the server's replies to the
		// first calls must be read while the rest is still written.
		wrote := make(chan error, 1)
		go func() { _, err := nc.Write(b); wrote <- err }()
		got := map[int32]bool{}
		for range perBurst {
			h, rep, err := wire.ReadFrame(br, nil, 1<<20)
			require.NoError(t, err, "burst %d, %d replies read", burst, len(got))
			require.Equal(t, wire.KindReply, h.Kind)
			want := h.Seqid
			require.True(t, want >= first && want <= seq && !got[want], "reply %d unexpected in burst %d", want, burst)
			got[want] = true
			var res wiretest.EchoResult
			mh, err := wire.ParseMsgHeader(proto.Binary, rep[wire.HeaderSize:])
			require.NoError(t, err)
			require.Equal(t, proto.Reply, mh.Type)
			require.NoError(t, codec.Decode(proto.Binary, rep[wire.HeaderSize+mh.Body:], nil, &res))
			require.NotNil(t, res.Success)
			require.Equal(t, payload(want), *res.Success, "call %d got another call's bytes", want)
		}
		require.NoError(t, <-wrote)
	}
	assert.Equal(t, 1, server.ReadBufGrown(s), "a deep burst of 4 KiB calls grows the buffer")
}
