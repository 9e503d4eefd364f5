//go:build cgo && linux

package server_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix"
	"github.com/hatrpc/hatrpc/test/lanes/gen/mix/mixserver"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// headFrame is a lane request: args as message name, seqid and timeout,
// in protocol p, with call headers md if any.
func headFrame(t testing.TB, p proto.Protocol, name string, seqid int32, timeout time.Duration, md metadata.MD, args proto.Struct) []byte {
	t.Helper()
	b, err := wiretest.Frame(p, wire.KindCall, proto.Call, name, seqid, timeout, md, args)
	require.NoError(t, err)
	return b
}

// headServer serves atb's echo (as "echo" and "Echo:echo") and the test
// echo service as "W", with a 256 B message limit.
func headServer() *server.Server {
	lim := proto.DefaultLimits
	lim.MaxMessageSize = 256
	s := server.New(server.WithLogger(quiet), server.WithLimits(lim))
	mixserver.RegisterEcho(s, atbEcho{})
	s.Register(wiretest.NewEcho().ServiceNamed("W"))
	return s
}

// TestLaneRequestHead: a lane that knows the head of its plain calls
// answers every request, plain or not, with the bytes a lane that
// decodes each one in full answers, and takes the shortcut exactly for
// requests with the learned head.
func TestLaneRequestHead(t *testing.T) {
	s := headServer()
	call, known, done := server.HeadLaneCaller(s)
	defer done()
	full, fdone := server.FullLaneCaller(s)
	defer fdone()

	echo := func(b byte) *mix.EchoEchoArgs { return &mix.EchoEchoArgs{Payload: bytes.Repeat([]byte{b}, 64)} }
	plain := headFrame(t, proto.Binary, "echo", 7, 0, nil, echo(1))
	badLen := bytes.Clone(plain)
	binary.BigEndian.PutUint32(badLen, uint32(len(plain)))
	truncated := bytes.Clone(plain[:len(plain)-1]) // no field stop
	binary.BigEndian.PutUint32(truncated, uint32(len(truncated)-4))
	negative := bytes.Clone(plain)
	binary.BigEndian.PutUint64(negative[12:], 1<<63)
	steps := []struct {
		name  string
		req   []byte
		known bool // has the head learned before it
		kind  wire.Kind
	}{
		{"first plain call", plain, false, wire.KindReply},
		{"plain, other payload and a timeout", headFrame(t, proto.Binary, "echo", 7, time.Minute, nil, echo(2)), true, wire.KindReply},
		{"empty args", headFrame(t, proto.Binary, "echo", 7, 0, nil, &mix.EchoEchoArgs{}), true, wire.KindReply},
		{"truncated args", truncated, true, wire.KindException},
		{"negative timeout", negative, false, wire.KindException},
		{"length field off", badLen, false, wire.KindException},
		{"over the message limit", headFrame(t, proto.Binary, "echo", 7, 0, nil, &mix.EchoEchoArgs{Payload: make([]byte, 300)}), false, wire.KindException},
		{"call headers", headFrame(t, proto.Binary, "echo", 7, 0, metadata.MD{"k": "v"}, echo(3)), false, wire.KindReply},
		{"still known after headers", headFrame(t, proto.Binary, "echo", 7, 0, nil, echo(4)), true, wire.KindReply},
		{"other seqid", headFrame(t, proto.Binary, "echo", 8, 0, nil, echo(5)), false, wire.KindReply},
		{"learned the other seqid", headFrame(t, proto.Binary, "echo", 8, 0, nil, echo(6)), true, wire.KindReply},
		{"qualified name", headFrame(t, proto.Binary, "Echo:echo", 7, 0, nil, echo(7)), false, wire.KindReply},
		{"another function", headFrame(t, proto.Binary, "W:echo", 7, 0, nil, &wiretest.EchoArgs{Msg: "hi"}), false, wire.KindReply},
		{"unknown function", headFrame(t, proto.Binary, "ohce", 7, 0, nil, echo(8)), false, wire.KindException},
		{"unknown function again (not learned)", headFrame(t, proto.Binary, "ohce", 7, 0, nil, echo(8)), false, wire.KindException},
		{"back to the function learned last", headFrame(t, proto.Binary, "W:echo", 7, 0, nil, &wiretest.EchoArgs{Msg: "ho"}), true, wire.KindReply},
		{"compact", headFrame(t, proto.Compact, "echo", 7, 0, nil, echo(9)), false, wire.KindReply},
		{"compact, learned", headFrame(t, proto.Compact, "echo", 7, time.Second, nil, echo(10)), true, wire.KindReply},
	}
	for _, st := range steps {
		require.Equal(t, st.known, known(st.req), "%s: shortcut", st.name)
		got, want := bytes.Clone(call(st.req)), bytes.Clone(full(st.req))
		require.Equal(t, want, got, "%s: reply", st.name)
		h, err := wire.DecodeHeader(got, 1<<20)
		require.NoError(t, err, st.name)
		require.Equal(t, st.kind, h.Kind, "%s: %q", st.name, got)
	}

	// A Register changes the method table: the learned method may be
	// stale, so the next call takes the full path and learns anew.
	req := headFrame(t, proto.Compact, "echo", 7, 0, nil, echo(11))
	require.True(t, known(req))
	s.Register(wiretest.NewEcho().ServiceNamed("X"))
	require.False(t, known(req))
	assert.Equal(t, bytes.Clone(full(req)), bytes.Clone(call(req)))
	assert.True(t, known(req))
}

// FuzzLaneRequest: whatever a client sends, a lane that learns heads
// answers as a lane that decodes every request in full.
func FuzzLaneRequest(f *testing.F) {
	echo := &mix.EchoEchoArgs{Payload: []byte("seed")}
	f.Add(headFrame(f, proto.Binary, "echo", 7, 0, nil, echo))
	f.Add(headFrame(f, proto.Compact, "echo", 7, time.Second, nil, echo))
	f.Add(headFrame(f, proto.Binary, "echo", 7, 0, metadata.MD{"k": "v"}, echo))
	f.Add(headFrame(f, proto.Binary, "W:echo", 1, 0, nil, &wiretest.EchoArgs{Msg: "x"}))
	s := headServer()
	call, _, done := server.HeadLaneCaller(s)
	defer done()
	full, fdone := server.FullLaneCaller(s)
	defer fdone()
	plain := headFrame(f, proto.Binary, "echo", 7, 0, nil, echo)
	f.Fuzz(func(t *testing.T, req []byte) {
		call(plain) // the lane knows a head, maybe this request's
		got := bytes.Clone(call(bytes.Clone(req)))
		require.Equal(t, bytes.Clone(full(bytes.Clone(req))), got)
	})
}

// BenchmarkLaneRequestHead is BenchmarkLaneCall's atb echo on a lane that
// decodes every request in full and on one that knows the head.
func BenchmarkLaneRequestHead(b *testing.B) {
	for _, name := range []string{"full", "head"} {
		b.Run(name, func(b *testing.B) {
			s := server.New(server.WithLogger(quiet))
			mixserver.RegisterEcho(s, atbEcho{})
			call, done := server.LaneCaller(s)
			if name == "full" {
				call, done = server.FullLaneCaller(s)
			}
			defer done()
			req := frameOf(b, wire.KindCall, "echo", 7, &mix.EchoEchoArgs{Payload: make([]byte, 64)})
			require.NotEmpty(b, call(req))
			b.ReportAllocs()
			for b.Loop() {
				call(req)
			}
		})
	}
}
