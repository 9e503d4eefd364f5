package wire

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// TestNonStrictBinaryRule pins the one rule for non-strict binary
// (docs/design/wire.md section 1): pkg/proto decodes such a message when
// handed one, and a connection that opens with one is not detected.
func TestNonStrictBinaryRule(t *testing.T) {
	// "get", CALL, seqid 1, empty struct, the pre-versioned way.
	msg := []byte{0, 0, 0, 3, 'g', 'e', 't', 1, 0, 0, 0, 1, 0}
	var empty nested
	h, err := proto.DecodeMessage(proto.Binary, msg, nil, &empty)
	require.NoError(t, err)
	require.Equal(t, proto.MessageHeader{Name: "get", Type: proto.Call, SeqID: 1}, h)

	for _, in := range [][]byte{msg, proto.AppendFrame(nil, msg)} {
		_, err := Detect(bufio.NewReader(bytes.NewReader(in)))
		require.ErrorIs(t, err, ErrGarbage)
	}
}
