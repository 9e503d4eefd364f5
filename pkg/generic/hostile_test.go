package generic_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	hg "github.com/hatrpc/hatrpc/test/gen/interop"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// exchange sends one framed binary message on a new connection and returns
// the framed reply, or nil when the server closed the connection instead.
func exchange(t *testing.T, addr string, msg []byte) []byte {
	t.Helper()
	c := testutil.DialRaw(t, addr)
	require.NoError(t, c.SetDeadline(time.Now().Add(time.Minute)))
	_, err := c.Write(proto.AppendFrame(nil, msg))
	require.NoError(t, err)
	br := bufio.NewReader(c)
	var n [4]byte
	if _, err := io.ReadFull(br, n[:]); err != nil {
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "no answer")
		return nil
	}
	reply := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err = io.ReadFull(br, reply)
	require.NoError(t, err)
	return reply
}

// TestHostileArgs: a generic server answers malformed arguments exactly as
// the generated server of the same IDL does, byte for byte: the same
// protocol-error exception, naming the same fault.
func TestHostileArgs(t *testing.T) {
	gen, _ := testutil.StartHatInterop(t)
	gs := startGenericInterop(t)
	header := func(name string) []byte {
		w := proto.NewBinaryWriter(nil)
		w.WriteMessageBegin(name, proto.Call, 9)
		return w.Bytes()
	}
	good, err := proto.EncodeMessage(proto.Binary, nil, "echoAll", proto.Call, 9, &hg.InteropEchoAllArgs{V: testutil.HatSample()})
	require.NoError(t, err)
	tests := map[string][]byte{
		"truncated":           good[:len(good)/2],
		"list of wrong type":  append(header("echoAll"), 0x0c, 0, 1, 0x0f, 0, 10, 0x02, 0, 0, 0, 1, 1, 0, 0),
		"negative list size":  append(header("echoAll"), 0x0c, 0, 1, 0x0f, 0, 10, 0x08, 0xff, 0xff, 0xff, 0xff, 0, 0),
		"huge list size":      append(header("echoAll"), 0x0c, 0, 1, 0x0f, 0, 10, 0x08, 0x7f, 0xff, 0xff, 0xff, 0, 0),
		"bad field type":      append(header("echoAll"), 0x63, 0, 1, 0),
		"string past the end": append(header("echoString"), 0x0b, 0, 1, 0x00, 0x10, 0, 0, 'a', 0),
		"unknown method":      append(header("nope"), 0),
	}
	for name, msg := range tests {
		t.Run(name, func(t *testing.T) {
			want := exchange(t, gen.Addr, msg)
			got := exchange(t, gs.Addr, msg)
			assert.Equal(t, want, got)
			assert.NotEmpty(t, got, "both answer with an exception")
		})
	}
}
