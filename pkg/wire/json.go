package wire

import (
	"fmt"
	"io"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// jsonStart is the first byte of a TJSONProtocol message, an array:
// [1,"name",type,seqid,{body}].
const jsonStart = '['

// scanJSON copies one unframed TJSONProtocol message from s.br: it finds
// the end of the top-level array, skipping brackets in strings (and
// escaped quotes), within the size limit and a bracket depth bound by
// the nesting limit (a Thrift level takes at most two JSON levels: a
// field's object and a struct's, a map's array and object). The message
// is checked in full only when it is decoded.
func scanJSON(s *scanner) error {
	// Whitespace between messages (no Apache writer sends any) is skipped.
	for {
		b, err := s.br.Peek(1)
		if err != nil {
			return err // io.EOF at a message boundary is a clean end
		}
		if b[0] != ' ' && b[0] != '\t' && b[0] != '\n' && b[0] != '\r' {
			break
		}
		_, _ = s.br.Discard(1)
	}
	if b, _ := s.br.Peek(1); b[0] != jsonStart {
		return fmt.Errorf("%w: JSON message starts with %q", proto.ErrJSONSyntax, b[0])
	}
	maxDepth := 2*s.lim.MaxDepth + 4
	depth, inStr, esc := 0, false, false
	for {
		if _, err := s.br.Peek(1); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		buf, _ := s.br.Peek(s.br.Buffered())
		n, done := 0, false
		for n < len(buf) && !done {
			c := buf[n]
			n++
			switch {
			case inStr:
				switch {
				case esc:
					esc = false
				case c == '\\':
					esc = true
				case c == '"':
					inStr = false
				}
			case c == '"':
				inStr = true
			case c == '[' || c == '{':
				if depth++; depth > maxDepth {
					return fmt.Errorf("%w: JSON nested over %d", proto.ErrDepthLimit, maxDepth)
				}
			case c == ']' || c == '}':
				depth--
				done = depth == 0
			}
		}
		if _, err := s.take(n); err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// parseJSONHeader is ParseMsgHeader for TJSONProtocol.
func parseJSONHeader(msg []byte) (MsgHeader, error) {
	name, typ, seqid, body, err := proto.JSONMessageHeader(msg)
	return MsgHeader{Name: name, Type: typ, Seqid: seqid, Body: body}, err
}

func (c *Codec) json() *proto.JSONCodec {
	if c.js == nil {
		c.js = new(proto.JSONCodec)
	}
	return c.js
}
