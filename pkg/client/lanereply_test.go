//go:build cgo && linux

package client_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// replyFrame encodes one lane reply frame: body as message type typ
// under name and seqid, with md as reply headers if any.
func replyFrame(t testing.TB, p proto.Protocol, typ proto.MessageType, name string, seqid int32, body proto.Struct, md metadata.MD) []byte {
	t.Helper()
	kind := wire.KindReply
	if typ == proto.Exception {
		kind = wire.KindException
	}
	b, err := wiretest.Frame(p, kind, typ, name, seqid, 0, md, body)
	require.NoError(t, err)
	return b
}

func plainReply(t testing.TB, p proto.Protocol, msg string) []byte {
	return replyFrame(t, p, proto.Reply, "echo", 1, &wiretest.EchoResult{Success: &msg}, nil)
}

// decodeBoth decodes resp on lane l and by the full path, and asserts
// that both agree: the same error text and the same result.
func decodeBoth(t testing.TB, l *client.TestLane, resp []byte) error {
	t.Helper()
	var fast, full wiretest.EchoResult
	ferr := l.Decode(append([]byte(nil), resp...), &fast, false)
	gerr := l.DecodeFull(append([]byte(nil), resp...), &full, false)
	if gerr == nil {
		assert.NoError(t, ferr)
	} else if assert.Error(t, ferr) {
		assert.Equal(t, gerr.Error(), ferr.Error())
	}
	assert.Equal(t, full, fast)
	return ferr
}

func TestLaneReplyHead(t *testing.T) {
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		t.Run(p.String(), func(t *testing.T) {
			l := client.NewTestLane()
			plain := plainReply(t, p, "hello")
			require.NoError(t, decodeBoth(t, l, plain))
			// The head learned: the frame header after the length, and
			// the message header, up to the result struct.
			mh, err := wire.ParseMsgHeader(p, plain[wire.HeaderSize:])
			require.NoError(t, err)
			require.Equal(t, plain[4:wire.HeaderSize+mh.Body], l.Head())

			excBody := proto.NewApplicationException(proto.ExcInternalError, "boom")
			long := plainReply(t, p, string(make([]byte, 300)))
			badLen := plainReply(t, p, "hello")
			binary.BigEndian.PutUint32(badLen, uint32(len(badLen)))
			truncated := plain[:len(plain)-2]
			binary.BigEndian.PutUint32(truncated, uint32(len(truncated)-4))
			cases := []struct {
				name string
				resp []byte
				fast bool // the head matches: no full parse
				ok   bool
			}{
				{"plain", plainReply(t, p, "world"), true, true},
				{"longer body", long, true, true},
				{"declared exception", replyFrame(t, p, proto.Reply, "echo", 1, &wiretest.EchoResult{Err: &wiretest.EchoError{Code: 7, Why: "no"}}, nil), true, true},
				{"application exception", replyFrame(t, p, proto.Exception, "echo", 1, excBody, nil), false, false},
				{"reply headers", replyFrame(t, p, proto.Reply, "echo", 1, &wiretest.EchoResult{}, metadata.MD{"k": "v"}), false, true},
				{"other name", replyFrame(t, p, proto.Reply, "ohce", 1, &wiretest.EchoResult{}, nil), false, true},
				{"other seqid", replyFrame(t, p, proto.Reply, "echo", 2, &wiretest.EchoResult{}, nil), false, true},
				{"length field off", badLen, false, false},
				{"truncated body", truncated, true, false},
				{"only the head", plain[:len(l.Head())+4], false, false},
				{"empty", nil, false, false},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					fast := l.Shortcut(tc.resp)
					assert.Equal(t, tc.fast, fast, "took the shortcut")
					err := decodeBoth(t, l, tc.resp)
					assert.Equal(t, tc.ok, err == nil, "decoded: %v", err)
				})
			}
			// A frame over the Conn's message limit fails as before, with
			// the head matching.
			l.SetMaxMessage(len(long) - wire.HeaderSize - 1)
			err = decodeBoth(t, l, long)
			assert.ErrorIs(t, err, wire.ErrFrameTooLarge)
		})
	}
}

// TestLaneReplyLearnsPlainOnly: a lane whose first reply is an exception
// or carries headers learns nothing from it, and learns from the next
// plain one.
func TestLaneReplyLearnsPlainOnly(t *testing.T) {
	l := client.NewTestLane()
	exc := replyFrame(t, proto.Binary, proto.Exception, "echo", 1, proto.NewApplicationException(proto.ExcInternalError, "boom"), nil)
	assert.Error(t, decodeBoth(t, l, exc))
	assert.Nil(t, l.Head())
	withMD := replyFrame(t, proto.Binary, proto.Reply, "echo", 1, &wiretest.EchoResult{}, metadata.MD{"k": "v"})
	assert.NoError(t, decodeBoth(t, l, withMD))
	assert.Nil(t, l.Head())
	assert.NoError(t, decodeBoth(t, l, plainReply(t, proto.Binary, "x")))
	assert.NotNil(t, l.Head())
}

// FuzzLaneReply: whatever a peer sends, a lane that learned a head
// decodes it exactly as the full path does.
func FuzzLaneReply(f *testing.F) {
	f.Add(plainReply(f, proto.Binary, "hello"))
	f.Add(plainReply(f, proto.Compact, "hello"))
	f.Add(replyFrame(f, proto.Binary, proto.Exception, "echo", 1, proto.NewApplicationException(proto.ExcInternalError, "boom"), nil))
	f.Add(replyFrame(f, proto.Binary, proto.Reply, "echo", 1, &wiretest.EchoResult{Err: &wiretest.EchoError{Code: 1}}, nil))
	heads := [][]byte{plainReply(f, proto.Binary, "seed"), plainReply(f, proto.Compact, "seed")}
	f.Fuzz(func(t *testing.T, resp []byte) {
		for _, h := range heads {
			l := client.NewTestLane()
			require.NoError(t, decodeBoth(t, l, h))
			require.NotNil(t, l.Head())
			decodeBoth(t, l, resp)
		}
	})
}

// BenchmarkLaneReply decodes a 64 B echo's reply frame by the full path
// and on a lane that learned its head.
func BenchmarkLaneReply(b *testing.B) {
	payload := make([]byte, 64)
	resp := replyFrame(b, proto.Binary, proto.Reply, "echo", 1, &wiretest.EchoArgs{Blob: payload}, nil)
	l := client.NewTestLane()
	var res wiretest.EchoArgs
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			if err := l.DecodeFull(resp, &res, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head", func(b *testing.B) {
		for b.Loop() {
			if err := l.Decode(resp, &res, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
