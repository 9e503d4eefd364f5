package bench

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The floor's Thrift message is what Apache's framed binary protocol
// writes for echo(1: binary payload); bad messages are refused, never
// read past.
func TestParseThriftEcho(t *testing.T) {
	good := appendThriftEcho(nil, thriftCall, 7, 1, []byte("payload"))[4:]
	mut := func(at int, b ...byte) []byte {
		m := bytes.Clone(good)
		copy(m[at:], b)
		return m
	}
	tests := []struct {
		name string
		msg  []byte
		typ  uint32
		id   int16
		want string // "" for ok
	}{
		{"call", good, thriftCall, 1, ""},
		{"empty payload", appendThriftEcho(nil, thriftReply, 3, 0, nil)[4:], thriftReply, 0, ""},
		{"reply expected", good, thriftReply, 0, "header"},
		{"old version", mut(0, 0x80, 0x02), thriftCall, 1, "header"},
		{"name length", mut(7, 5), thriftCall, 1, "name"},
		{"other name", mut(8, 'a'), thriftCall, 1, "name"},
		{"field type", mut(16, 12), thriftCall, 1, "field"},
		{"field id", mut(17, 0, 2), thriftCall, 1, "field"},
		{"length over", mut(19, 0, 0, 0, 8), thriftCall, 1, "length"},
		{"length huge", mut(19, 0xff, 0xff, 0xff, 0xff), thriftCall, 1, "length"},
		{"no stop", mut(len(good)-1, 1), thriftCall, 1, "length"},
		{"truncated", good[:20], thriftCall, 1, "header"},
		{"nothing", nil, thriftCall, 1, "header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seqid, payload, err := parseThriftEcho(tc.msg, tc.typ, tc.id)
			if tc.want != "" {
				require.ErrorIs(t, err, errRawThrift)
				assert.Contains(t, err.Error(), tc.want)
				return
			}
			require.NoError(t, err)
			size := int(binary.BigEndian.Uint32(tc.msg[19:]))
			assert.Len(t, payload, size)
			if tc.typ == thriftCall {
				assert.Equal(t, uint32(7), seqid)
				assert.Equal(t, "payload", string(payload))
			}
		})
	}
}

func FuzzParseThriftEcho(f *testing.F) {
	f.Add(appendThriftEcho(nil, thriftCall, 1, 1, []byte("x"))[4:])
	f.Add(appendThriftEcho(nil, thriftReply, 1, 0, nil)[4:])
	f.Fuzz(func(t *testing.T, msg []byte) {
		for _, k := range []struct {
			typ uint32
			id  int16
		}{{thriftCall, 1}, {thriftReply, 0}} {
			seqid, payload, err := parseThriftEcho(msg, k.typ, k.id)
			if err != nil {
				continue
			}
			// A message accepted re-encodes to itself.
			again := appendThriftEcho(nil, k.typ, seqid, k.id, payload)[4:]
			require.Equal(t, msg, again)
		}
	})
}
