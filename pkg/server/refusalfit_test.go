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
// not fit; a plain Thrift refusal keeps the name, which its client checks.
func TestRefusalFitsRoom(t *testing.T) {
	const text = "hatrpc: reply of 5000 bytes exceeds the message limit of 4096 bytes"
	exc := proto.NewApplicationException(proto.ExcInternalError, text)
	size := func(p proto.Protocol, name, msg string) int {
		codec := wire.GetCodec()
		defer wire.PutCodec(codec)
		b, err := codec.AppendMessage(nil, p, name, proto.Exception, 9, proto.NewApplicationException(proto.ExcInternalError, msg))
		require.NoError(t, err)
		return len(b)
	}
	long := strings.Repeat("m", 4000)
	cases := []struct {
		name     string
		proto    proto.Protocol
		method   string
		room     int
		anon     bool
		wantName string
		wantText string
	}{
		{"whole", proto.Binary, "over", 4096, true, "over", text},
		{"whole-plain", proto.Binary, "over", 4096, false, "over", text},
		{"cut", proto.Binary, long, size(proto.Binary, long, text) - 20, true, long, text[:len(text)-20]},
		{"cut-plain", proto.Binary, long, size(proto.Binary, long, text) - 20, false, long, text[:len(text)-20]},
		{"cut-compact", proto.Compact, long, size(proto.Compact, long, text) - 30, true, long, text[:len(text)-30]},
		{"no-name", proto.Binary, long, size(proto.Binary, "", text), true, "", text},
		{"no-name-cut", proto.Binary, long, size(proto.Binary, "", text) - 5, true, "", text[:len(text)-5]},
		{"plain-keeps-name", proto.Binary, long, size(proto.Binary, long, "h") - 1, false, long, "h"},
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
			var got proto.ApplicationException
			require.NoError(t, codec.Decode(tc.proto, b[3+mh.Body:], nil, &got))
			require.Equal(t, proto.ExcInternalError, got.Type)
			require.Equal(t, tc.wantText, got.Message)
			require.Equal(t, size(tc.proto, tc.wantName, tc.wantText), len(b)-3)
			if tc.name != "plain-keeps-name" {
				require.LessOrEqual(t, len(b)-3, tc.room)
			}
		})
	}
}
