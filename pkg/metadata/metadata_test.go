package metadata_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/metadata"
)

func TestOutgoing(t *testing.T) {
	cases := []struct {
		name string
		ctx  func() context.Context
		want metadata.MD
	}{
		{"none", context.Background, nil},
		{"new", func() context.Context {
			return metadata.NewOutgoingContext(context.Background(), metadata.Pairs("a", "1", "dangling"))
		}, metadata.MD{"a": "1"}},
		{"append keeps and overrides", func() context.Context {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "a", "1", "b", "2")
			return metadata.AppendToOutgoingContext(ctx, "b", "3")
		}, metadata.MD{"a": "1", "b": "3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md, ok := metadata.FromOutgoingContext(tc.ctx())
			require.Equal(t, tc.want != nil, ok)
			require.Equal(t, tc.want, md)
		})
	}
	// Appending never changes the parent's map.
	parent := metadata.AppendToOutgoingContext(context.Background(), "a", "1")
	_ = metadata.AppendToOutgoingContext(parent, "a", "2")
	md, _ := metadata.FromOutgoingContext(parent)
	require.Equal(t, metadata.MD{"a": "1"}, md)
}

func TestServerCall(t *testing.T) {
	ctx := context.Background()
	require.False(t, metadata.SetReply(ctx, "k", "v"), "no call: nowhere to put it")
	require.Equal(t, "", metadata.RequestID(ctx))

	sc := metadata.NewServerCall(metadata.MD{metadata.RequestIDKey: "r1", "x": "y"})
	ctx = metadata.NewServerContext(ctx, sc)
	in, ok := metadata.FromIncomingContext(ctx)
	require.True(t, ok)
	require.Equal(t, "y", in["x"])
	require.Equal(t, "r1", metadata.RequestID(ctx))
	require.Nil(t, sc.Reply())
	require.True(t, metadata.SetReply(ctx, "k", "v", "k2"))
	require.True(t, metadata.SetReply(ctx, "k", "w"))
	require.Equal(t, metadata.MD{"k": "w"}, sc.Reply())

	_, ok = metadata.FromIncomingContext(metadata.NewServerContext(context.Background(), metadata.NewServerCall(nil)))
	require.False(t, ok)
}

func TestRequestIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := metadata.NewRequestID()
		require.Regexp(t, "^[0-9a-f]{16}$", id)
		require.False(t, seen[id])
		seen[id] = true
	}
}

func TestCaptureReply(t *testing.T) {
	require.Nil(t, metadata.ReplyCapture(context.Background()))
	var md metadata.MD
	ctx := metadata.CaptureReply(context.Background(), &md)
	require.Same(t, &md, metadata.ReplyCapture(ctx))
}

func TestValidHTTPHeader(t *testing.T) {
	cases := []struct {
		k, v string
		ok   bool
	}{
		{"x-request-id", "0123abcd", true},
		{"Authorization", "Bearer a b\tc", true},
		{"", "v", false},
		{"a b", "v", false},
		{"a:b", "v", false},
		{"k\xff", "v", false},
		{"k", "line\nbreak", false},
		{"k", "nul\x00", false},
		{"k", "del\x7f", false},
		{"k", "ünïcode", true},
	}
	for _, tc := range cases {
		require.Equal(t, tc.ok, metadata.ValidHTTPHeader(tc.k, tc.v), "%q: %q", tc.k, tc.v)
	}
}

// TestLazyServerCallCopy: the headers read back are the block's as it was
// when the call began, small (kept in the call's own allocation) or large,
// whatever the caller does to its buffer afterwards.
func TestLazyServerCallCopy(t *testing.T) {
	parse := func(b []byte) (metadata.MD, error) { return metadata.MD{"raw": string(b)}, nil }
	cases := []struct {
		name string
		n    int
	}{
		{"empty", 0},
		{"request id", 31},
		{"inline limit", 64},
		{"past inline", 65},
		{"large", 4096},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := make([]byte, tc.n)
			for i := range raw {
				raw[i] = byte('a' + i%26)
			}
			want := string(raw)
			sc := metadata.NewLazyServerCallCopy(raw, parse)
			for i := range raw {
				raw[i] = 'X' // the server reuses its read buffer
			}
			require.Equal(t, metadata.MD{"raw": want}, sc.Incoming())
			require.Nil(t, sc.Reply())
			sc.SetReply("k", "v")
			require.Equal(t, metadata.MD{"k": "v"}, sc.Reply())
		})
	}
}

// TestServerCallSlab: calls made one after another from a slab (across
// several of its blocks) each keep their own headers and reply headers,
// whatever the caller does to its buffer afterwards and whatever later
// calls of the slab do.
func TestServerCallSlab(t *testing.T) {
	parse := func(b []byte) (metadata.MD, error) { return metadata.MD{"raw": string(b)}, nil }
	cases := []struct {
		name  string
		n     int // header block bytes
		calls int
	}{
		{"request ids, one block", 31, 3},
		{"request ids, several blocks", 31, 50},
		{"inline limit", 64, 20},
		{"past inline", 65, 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var slab metadata.ServerCallSlab
			raw := make([]byte, tc.n)
			var calls []*metadata.ServerCall
			var wants []string
			for i := range tc.calls {
				for j := range raw {
					raw[j] = byte('a' + (i+j)%26)
				}
				wants = append(wants, string(raw))
				sc := slab.NewLazyCopy(raw, parse)
				sc.SetReply("call", string(rune('A'+i%26)))
				calls = append(calls, sc)
			}
			for j := range raw {
				raw[j] = 'X' // the server reuses its read buffer
			}
			for i, sc := range calls {
				require.Equal(t, metadata.MD{"raw": wants[i]}, sc.Incoming(), "call %d", i)
				require.Equal(t, metadata.MD{"call": string(rune('A' + i%26))}, sc.Reply(), "call %d", i)
			}
		})
	}
}
