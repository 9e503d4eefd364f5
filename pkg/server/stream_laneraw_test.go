//go:build cgo && linux

package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

type laneFrame struct {
	kind    wire.Kind
	id      int32
	payload []byte
}

func laneFrames(t *testing.T, b []byte) []laneFrame {
	t.Helper()
	var out []laneFrame
	for off := 0; off < len(b); {
		h, err := wire.DecodeHeader(b[off:], 1<<20)
		require.NoError(t, err)
		end := off + wire.HeaderSize + h.PayloadLen()
		require.LessOrEqual(t, end, len(b))
		out = append(out, laneFrame{h.Kind, h.Seqid, b[off+wire.HeaderSize : end]})
		off = end
	}
	return out
}

func poll(id int32) []byte { return wire.AppendWindowFrame(nil, id, 0, 0) }

// Hand-made requests on a lane carrying a stream: a stream that breaks
// the rules is reset with the error a TCP connection's would get, and the
// lane carries the next stream; a frame no stream lane takes is a
// protocol error.
func TestLaneStreamRulesBroken(t *testing.T) {
	tests := []struct {
		name string
		req  func(t *testing.T) []byte
		text string
	}{
		{"data past the window", func(t *testing.T) []byte {
			return cat(openFrame(t, 1, "hold"), dataFrame(t, 1, "1"), dataFrame(t, 1, "2"), dataFrame(t, 1, "3"))
		}, "stream: data past the window: 2 messages, 18 bytes buffered of a window of 2 messages, 1048576 bytes (connection: 18 of 16777216 bytes)"},
		{"data after the end", func(t *testing.T) []byte {
			return cat(openFrame(t, 1, "hold"), endFrame(1), dataFrame(t, 1, "late"))
		}, "stream: data after the end of the stream"},
		{"credit never owed", func(t *testing.T) []byte {
			return cat(openFrame(t, 1, "hold"), wire.AppendWindowFrame(nil, 1, 5, 5))
		}, "stream: window update beyond what was sent: 5 messages, 5 bytes with 0, 0 in flight"},
		{"unknown method", func(t *testing.T) []byte {
			return cat(openFrame(t, 1, "nope"), dataFrame(t, 1, "x"))
		}, "unknown method S:nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := startStreams(t, server.WithStreamWindow(2, 0, 0))
			call, done := server.StreamLaneCaller(s)
			defer done()
			fs := laneFrames(t, call(tt.req(t)))
			var first *laneFrame // the stream's reset (a refused open's data gets one more)
			for i := range fs {
				if fs[i].kind == wire.KindStreamReset && first == nil {
					first = &fs[i]
				}
			}
			require.NotNil(t, first, "no reset in %v", fs)
			require.Equal(t, int32(1), first.id)
			_, text, err := wire.ParseReset(first.payload)
			require.NoError(t, err)
			require.Equal(t, tt.text, text)
			countOnLane(t, call)
		})
	}
}

// countOnLane runs a server stream of two messages on the lane: open, its
// message and end in one request, then polls until the end.
func countOnLane(t *testing.T, call func([]byte) []byte) {
	t.Helper()
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	msg, err := codec.AppendStruct(make([]byte, wire.HeaderSize), proto.Binary, &wiretest.EchoArgs{Mode: 2})
	require.NoError(t, err)
	wire.SealFrame(msg, wire.KindStreamData, 0, 1, 0)
	var got []wire.Kind
	req := cat(openFrame(t, 1, "count"), msg, endFrame(1))
	for len(got) == 0 || got[len(got)-1] != wire.KindStreamEnd {
		require.Less(t, len(got), 100, "the stream never ended: %v", got)
		for _, f := range laneFrames(t, call(req)) {
			if f.kind != wire.KindStreamWindow {
				got = append(got, f.kind)
			}
		}
		req = poll(1)
	}
	require.Equal(t, []wire.Kind{wire.KindStreamData, wire.KindStreamData, wire.KindStreamEnd}, got)
}

func TestLaneStreamBadFrame(t *testing.T) {
	s, _, _ := startStreams(t)
	call, done := server.StreamLaneCaller(s)
	defer done()
	req := cat(openFrame(t, 1, "hold"), endFrame(1))
	req = append(req, make([]byte, wire.HeaderSize)...)
	wire.SealFrame(req[len(req)-wire.HeaderSize:], wire.KindReply, 0, 1, 0)
	fs := laneFrames(t, call(req))
	require.Len(t, fs, 1)
	require.Equal(t, wire.KindStreamReset, fs[0].kind)
	typ, text, err := wire.ParseReset(fs[0].payload)
	require.NoError(t, err)
	require.Equal(t, int32(proto.ExcProtocolError), typ)
	require.Equal(t, "wire: bad frame: proto: invalid data: frame kind 2 on a lane carrying a stream", text)
	require.Eventually(t, func() bool { n, _ := server.StreamState(s); return n == 0 }, eventually, 1e6)
}

// Credit followed by an empty credit is a poll: the server applies the
// credit and holds the request until it has frames, so each exchange
// after the first carries the stream's data (never an empty answer to
// credit alone), and a stream longer than its window ends.
func TestLaneStreamCreditPolls(t *testing.T) {
	s, _, _ := startStreams(t)
	call, done := server.StreamLaneCaller(s)
	defer done()
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	const n = 40 // past the default window of 16 messages
	msg, err := codec.AppendStruct(make([]byte, wire.HeaderSize), proto.Binary, &wiretest.EchoArgs{Mode: n})
	require.NoError(t, err)
	wire.SealFrame(msg, wire.KindStreamData, 0, 1, 0)
	req := cat(openFrame(t, 1, "count"), msg, endFrame(1))
	data, exchanges := 0, 0
	for ended := false; !ended; exchanges++ {
		require.Less(t, exchanges, 100, "the stream never ended after %d messages", data)
		var msgs, bytes uint32
		carried := false
		for _, f := range laneFrames(t, call(req)) {
			switch f.kind {
			case wire.KindStreamData:
				data++
				msgs++
				bytes += uint32(len(f.payload))
				carried = true
			case wire.KindStreamEnd:
				ended, carried = true, true
			}
		}
		if exchanges > 0 {
			require.True(t, carried, "exchange %d: a poll answered with nothing", exchanges)
		}
		// This side's credit for all it got (as a consumer that read it
		// all), then the poll.
		req = cat(wire.AppendWindowFrame(nil, 1, msgs, bytes), poll(1))
	}
	require.Equal(t, n, data)
	require.Eventually(t, func() bool { n, _ := server.StreamState(s); return n == 0 }, eventually, 1e6)
}

func joinFrame(id int32, token string) []byte {
	return wire.AppendJoinFrame(nil, id, []byte(token))
}

// Hand-made requests on the two lanes of a client stream: the first
// opens it and offers a token, the second joins by it and carries the
// client's frames, each answered at once with an empty credit frame;
// the server's frames come on the first lane's polls. After the end the
// second lane's frames are strays, dropped; a join of no stream joins
// nothing; a malformed join, or an open on a joined lane, is a protocol
// error.
func TestLaneStreamJoin(t *testing.T) {
	const token = "0123456789abcdef"
	s, _, _ := startStreams(t)
	first, done1 := server.StreamLaneCaller(s)
	defer done1()
	second, done2 := server.StreamLaneCaller(s)
	defer done2()
	emptyCredit := []laneFrame{{wire.KindStreamWindow, 1, make([]byte, wire.WindowPayloadSize)}}
	for _, f := range laneFrames(t, first(cat(openFrame(t, 1, "sum"), joinFrame(1, token)))) {
		require.Equal(t, wire.KindStreamWindow, f.kind, "nothing but credit before the handler has a message")
	}
	require.Equal(t, emptyCredit, laneFrames(t, second(cat(joinFrame(1, token), dataFrame(t, 1, "a"), dataFrame(t, 1, "b")))))
	require.Equal(t, emptyCredit, laneFrames(t, second(endFrame(1))))
	var end *laneFrame
	for i := 0; end == nil; i++ {
		require.Less(t, i, 100, "the stream never ended")
		for _, f := range laneFrames(t, first(poll(1))) {
			if f.kind == wire.KindStreamEnd {
				end = &f
			}
		}
	}
	require.Contains(t, string(end.payload), "ab", "the reply joins the messages the second lane carried")
	require.Equal(t, emptyCredit, laneFrames(t, second(dataFrame(t, 1, "late"))), "a stray after the end")
	require.Eventually(t, func() bool { n, b := server.StreamState(s); return n == 0 && b == 0 }, eventually, 1e6)
	// The first lane carries the next stream; a join of no stream drops
	// what follows it.
	countOnLane(t, first)
	require.Equal(t, emptyCredit, laneFrames(t, second(cat(joinFrame(1, token), dataFrame(t, 1, "x")))))

	bad := []struct {
		name string
		req  []byte
		text string
	}{
		{"a short token", joinFrame(1, "short"), "wire: bad frame: proto: invalid data: join frame with 5 payload bytes, flags 0x0"},
		{"an open on a joined lane", cat(joinFrame(1, token), openFrame(t, 1, "sum")), "wire: bad frame: proto: invalid data: frame kind 8 on a lane joined to a stream"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			call, done := server.StreamLaneCaller(s)
			defer done()
			fs := laneFrames(t, call(tt.req))
			require.Len(t, fs, 1)
			require.Equal(t, wire.KindStreamReset, fs[0].kind)
			typ, text, err := wire.ParseReset(fs[0].payload)
			require.NoError(t, err)
			require.Equal(t, int32(proto.ExcProtocolError), typ)
			require.Equal(t, tt.text, text)
		})
	}
}
