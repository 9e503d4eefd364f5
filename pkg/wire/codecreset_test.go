package wire

import (
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// A codec kept by its owner after Reset holds none of the buffers its
// last message was encoded into or decoded from: each is collected once
// the owner drops it, whatever the protocol and whichever encode or
// decode used it.
func TestCodecResetKeepsNothing(t *testing.T) {
	hello := &Hello{Version: Version, Caps: CapFraming}
	tests := []struct {
		name string
		use  func(c *Codec, buf []byte) error
	}{
		{"AppendMessage binary", func(c *Codec, buf []byte) error {
			_, err := c.AppendMessage(buf[:0], proto.Binary, HelloMethod, proto.Call, 1, hello)
			return err
		}},
		{"AppendMessage compact", func(c *Codec, buf []byte) error {
			_, err := c.AppendMessage(buf[:0], proto.Compact, HelloMethod, proto.Call, 1, hello)
			return err
		}},
		{"AppendMessageRefs binary", func(c *Codec, buf []byte) error {
			_, _, err := c.AppendMessageRefs(buf[:0], proto.Binary, HelloMethod, proto.Call, 1, hello)
			return err
		}},
		{"AppendStruct compact", func(c *Codec, buf []byte) error {
			_, err := c.AppendStruct(buf[:0], proto.Compact, hello)
			return err
		}},
		{"Decode binary", func(c *Codec, buf []byte) error {
			b, err := proto.Marshal(proto.Binary, nil, hello)
			if err != nil {
				return err
			}
			return c.Decode(proto.Binary, buf[:copy(buf, b)], nil, &Hello{})
		}},
		{"Decode compact", func(c *Codec, buf []byte) error {
			b, err := proto.Marshal(proto.Compact, nil, hello)
			if err != nil {
				return err
			}
			return c.Decode(proto.Compact, buf[:copy(buf, b)], nil, &Hello{})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := GetCodec()
			defer PutCodec(c)
			arr := new([4096]byte)
			wp := weak.Make(arr)
			require.NoError(t, tt.use(c, arr[:]))
			c.Reset()
			arr = nil
			for range 3 {
				runtime.GC()
			}
			require.Nil(t, wp.Value(), "the codec still holds the buffer after Reset")
			runtime.KeepAlive(c)
		})
	}
}
