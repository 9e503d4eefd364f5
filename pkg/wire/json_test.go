package wire

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// TestReadJSONMessage: the scanner ends a message at its closing bracket,
// not at brackets or escaped quotes inside strings, across buffer
// refills, and skips whitespace between messages.
func TestReadJSONMessage(t *testing.T) {
	m1 := `[1,"a]}\"[{\\",1,7,{"1":{"str":"]]]\\\"}}"},"2":{"lst":["rec",1,{}]}}]`
	m2 := `[1,"b",4,8,{}]`
	in := m1 + "\n " + m2
	for _, size := range []int{16, 4096} {
		br := bufio.NewReaderSize(strings.NewReader(in), size)
		f, err := Detect(br)
		require.NoError(t, err)
		require.Equal(t, Format{Proto: proto.JSON}, f)
		charged := 0
		msg, err := ReadMessageCharged(br, f, nil, nil, func(n int) error { charged += n; return nil })
		require.NoError(t, err)
		require.Equal(t, m1, string(msg))
		require.Zero(t, charged, "small messages are not charged")
		h, err := ParseMsgHeader(proto.JSON, msg)
		require.NoError(t, err)
		require.Equal(t, "a]}\"[{\\", string(h.Name))
		require.Equal(t, int32(7), h.Seqid)
		require.Equal(t, byte('{'), msg[h.Body])
		msg, err = ReadMessage(br, f, nil, nil)
		require.NoError(t, err)
		require.Equal(t, m2, string(msg))
		h, err = ParseMsgHeader(proto.JSON, msg)
		require.NoError(t, err)
		require.Equal(t, "b", string(h.Name))
		require.Equal(t, proto.Oneway, h.Type)
		_, err = ReadMessage(br, f, nil, nil)
		require.ErrorIs(t, err, io.EOF)
	}
}

// TestReadJSONHostile: a stream that never closes its array, nests
// without end or grows past the limit fails without buffering more than
// the limit.
func TestReadJSONHostile(t *testing.T) {
	lim := &proto.Limits{MaxMessageSize: 1 << 12, MaxDepth: 8, MaxStringLength: 1 << 10, MaxContainerSize: 16}
	tests := []struct {
		name string
		in   io.Reader
		want error
	}{
		{"deep", strings.NewReader(strings.Repeat("[", 1000)), proto.ErrDepthLimit},
		{"endless string", io.MultiReader(strings.NewReader(`[1,"`), zeros{}), proto.ErrSizeLimit},
		{"endless array", io.MultiReader(strings.NewReader(`[1`), commas{}), proto.ErrSizeLimit},
		{"truncated", strings.NewReader(`[1,"x",1,0,{"1":{"i32":5}`), io.ErrUnexpectedEOF},
		{"not an array", strings.NewReader(`{"1":2}`), proto.ErrJSONSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := ReadMessage(bufio.NewReader(tt.in), Format{Proto: proto.JSON}, nil, lim)
			require.ErrorIs(t, err, tt.want)
			require.LessOrEqual(t, len(msg), lim.MaxMessageSize)
		})
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 'a'
	}
	return len(b), nil
}

type commas struct{}

func (commas) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = ','
	}
	return len(b), nil
}

func TestDetectJSON(t *testing.T) {
	for in, want := range map[string]Format{
		`[1,"x",1,0,{}]`:                   {Proto: proto.JSON},
		"\x00\x00\x00\x0e[1,\"x\",1,0,{}]": {Proto: proto.JSON, Framed: true},
	} {
		f, err := Detect(bufio.NewReader(strings.NewReader(in)))
		require.NoError(t, err)
		require.Equal(t, want, f)
		msg, err := ReadMessage(bufio.NewReader(strings.NewReader(in)), f, nil, nil)
		require.NoError(t, err)
		require.Equal(t, `[1,"x",1,0,{}]`, string(msg))
	}
}

// FuzzReadJSON: the scanner never panics, returns a prefix of the input,
// and agrees with the decoder on where a message ends.
func FuzzReadJSON(f *testing.F) {
	c := GetCodec()
	b, _ := c.AppendMessage(nil, proto.JSON, "m", proto.Call, 3, &nested{depth: 2})
	PutCodec(c)
	f.Add(b)
	f.Add([]byte(`[1,"a\"]",1,0,{"1":{"str":"[[{"}}] trailing`))
	f.Add([]byte(`[[[[[[[[[[`))
	f.Fuzz(func(t *testing.T, in []byte) {
		msg, err := ReadMessage(bufio.NewReader(bytes.NewReader(in)), Format{Proto: proto.JSON}, nil, fuzzLimits)
		if err == nil && !bytes.Contains(in, msg) {
			t.Fatalf("scanner returned bytes not in the input")
		}
		if len(in) == 0 || in[0] != '[' {
			return
		}
		d := proto.NewDecoder(fuzzLimits)
		if _, derr := d.Begin(proto.JSON, in); derr == nil {
			if err != nil || len(msg) != d.Pos() {
				t.Fatalf("decoder read a %d-byte message, scanner %d bytes (%v)", d.Pos(), len(msg), err)
			}
		}
	})
}
