//go:build cgo && linux

package server_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestNeverBlocksFrames: the FLOCK dispatcher runs a request itself only
// for a function whose server hints say never_blocks; anything else,
// including what it cannot read, goes to a worker.
func TestNeverBlocksFrames(t *testing.T) {
	s := server.New(server.WithLogger(quiet))
	t.Cleanup(func() { _ = s.Close() })
	quick := wiretest.NewEcho().ServiceNamed("Quick")
	quick.Hints = &hints.Service{Name: "Quick", Functions: []hints.Function{
		{Name: "echo", Server: hints.Set{NeverBlocks: true}},
		{Name: "fire", Server: hints.Set{NeverBlocks: true}}}}
	s.Register(quick)
	s.Register(wiretest.NewEcho().ServiceNamed("Slow"))
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	frame := func(name string, kind wire.Kind, typ proto.MessageType) []byte {
		b, err := codec.AppendMessage(make([]byte, wire.HeaderSize), proto.Binary, name, typ, 1, &wiretest.EchoArgs{Msg: "x"})
		require.NoError(t, err)
		wire.SealFrame(b, kind, 0, 1, 0)
		return b
	}
	tests := []struct {
		name string
		req  []byte
		want bool
	}{
		{"hinted function", frame("Quick:echo", wire.KindCall, proto.Call), true},
		{"function without the hint", frame("Slow:echo", wire.KindCall, proto.Call), false},
		{"hinted but oneway", frame("Quick:fire", wire.KindOneway, proto.Oneway), false},
		{"unknown method", frame("Quick:nope", wire.KindCall, proto.Call), false},
		{"not a frame", []byte("garbage that is no frame at all"), false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, server.NeverBlocks(s, tt.req))
		})
	}
}
