package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A refusal is made to fit the limit the reply did not: its text is cut
// when the method's name leaves it less room, and a HatRPC frame's (whose
// client reads no name) leaves the name out where even a cut text does
// not fit; a plain Thrift refusal keeps the name, which its client checks,
// and sheds the text, then the type: with neither it is no larger than a
// request naming the method (the smallest: arguments of no field), so
// whatever request reached the server, its refusal fits.
func TestRefusalFitsRoom(t *testing.T) {
	const text = "hatrpc: reply of 5000 bytes exceeds the message limit of 4096 bytes"
	exc := proto.NewApplicationException(proto.ExcInternalError, text)
	encode := func(p proto.Protocol, name string, typ proto.MessageType, body proto.Struct) int {
		codec := wire.GetCodec()
		defer wire.PutCodec(codec)
		b, err := codec.AppendMessage(nil, p, name, typ, 9, body)
		require.NoError(t, err)
		return len(b)
	}
	size := func(p proto.Protocol, name, msg string) int {
		return encode(p, name, proto.Exception, proto.NewApplicationException(proto.ExcInternalError, msg))
	}
	bare := func(p proto.Protocol, name string, typed bool) int {
		return encode(p, name, proto.Exception, &bareException{typ: proto.ExcInternalError, typed: typed})
	}
	// The smallest request naming the method: arguments with no field.
	request := func(p proto.Protocol, name string) int {
		return encode(p, name, proto.Call, &bareException{})
	}
	long := strings.Repeat("m", 4000)
	cases := []struct {
		name     string
		proto    proto.Protocol
		method   string
		room     int
		anon     bool
		wantName string
		wantType int32
		wantText string
		wantSize int
	}{
		{"whole", proto.Binary, "over", 4096, true, "over", proto.ExcInternalError, text, size(proto.Binary, "over", text)},
		{"whole-plain", proto.Binary, "over", 4096, false, "over", proto.ExcInternalError, text, size(proto.Binary, "over", text)},
		{"cut", proto.Binary, long, size(proto.Binary, long, text) - 20, true, long, proto.ExcInternalError, text[:len(text)-20], size(proto.Binary, long, text) - 20},
		{"cut-plain", proto.Binary, long, size(proto.Binary, long, text) - 20, false, long, proto.ExcInternalError, text[:len(text)-20], size(proto.Binary, long, text) - 20},
		{"cut-compact", proto.Compact, long, size(proto.Compact, long, text) - 30, true, long, proto.ExcInternalError, text[:len(text)-30], size(proto.Compact, long, text) - 30},
		{"no-name", proto.Binary, long, size(proto.Binary, "", text), true, "", proto.ExcInternalError, text, size(proto.Binary, "", text)},
		{"no-name-cut", proto.Binary, long, size(proto.Binary, "", text) - 5, true, "", proto.ExcInternalError, text[:len(text)-5], size(proto.Binary, "", text) - 5},
		{"plain-text-1", proto.Binary, long, size(proto.Binary, long, "h"), false, long, proto.ExcInternalError, "h", size(proto.Binary, long, "h")},
		{"plain-typed", proto.Binary, long, size(proto.Binary, long, "h") - 1, false, long, proto.ExcInternalError, "", bare(proto.Binary, long, true)},
		{"plain-typed-compact", proto.Compact, long, bare(proto.Compact, long, true), false, long, proto.ExcInternalError, "", bare(proto.Compact, long, true)},
		{"plain-bare", proto.Binary, long, request(proto.Binary, long), false, long, proto.ExcUnknown, "", request(proto.Binary, long)},
		{"plain-bare-compact", proto.Compact, long, request(proto.Compact, long), false, long, proto.ExcUnknown, "", request(proto.Compact, long)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			codec := wire.GetCodec()
			defer wire.PutCodec(codec)
			to := &replyTo{proto: tc.proto, name: tc.method, seqid: 9}
			b := appendRefused(codec, []byte("pre"), to, exc, tc.room, tc.anon)
			require.Equal(t, "pre", string(b[:3]))
			mh, err := wire.ParseMsgHeader(tc.proto, b[3:])
			require.NoError(t, err)
			require.Equal(t, proto.Exception, mh.Type)
			require.Equal(t, tc.wantName, string(mh.Name))
			require.Equal(t, int32(9), mh.Seqid)
			var got proto.ApplicationException
			require.NoError(t, codec.Decode(tc.proto, b[3+mh.Body:], nil, &got))
			require.Equal(t, tc.wantType, got.Type)
			require.Equal(t, tc.wantText, got.Message)
			require.Equal(t, tc.wantSize, len(b)-3)
			require.LessOrEqual(t, len(b)-3, tc.room)
		})
	}
}
