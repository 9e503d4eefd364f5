package sasl

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// What a connection's first bytes say it is.
type kind int

const (
	kindSASL  kind = iota // a SASL negotiation message: its status byte
	kindHTTP              // an HTTP request line
	kindOther             // NOSASL Thrift (framed or not), HatRPC's own, or garbage
)

// httpMethods are the request methods that make a connection an HTTP one
// (the HatRPC server detects the same on its own port).
var httpMethods = []string{"POST ", "GET ", "HEAD ", "PUT ", "DELETE ", "OPTIONS ", "PATCH "}

// sniff reads a connection's first byte, and its first 8 only when that
// byte can start an HTTP method. A SASL message starts with a status
// byte 1–5 (START first); a Thrift binary message with 0x80, a Thrift
// frame with its length's top byte, 0 for any frame under 16 MiB — so a
// byte 1–5 is SASL (it would be a frame of 16 MiB or more, which no
// client's first call is) and an upper-case letter is no Thrift.
func sniff(r *bufio.Reader) (kind, error) {
	b, err := r.Peek(1)
	if err != nil {
		return 0, err
	}
	switch {
	case b[0] >= statusStart && b[0] <= statusComplete:
		return kindSASL, nil
	case b[0] >= 'D' && b[0] <= 'P':
		b, _ = r.Peek(8) // every request line is longer; fewer bytes: not HTTP
		for _, m := range httpMethods {
			if bytes.HasPrefix(b, []byte(m)) {
				return kindHTTP, nil
			}
		}
	}
	return kindOther, nil
}

// maxName bounds the method name of a refused call's header.
const maxName = 256

// refuse answers a connection without SASL negotiation on a listener that
// requires PLAIN. A Thrift call (binary protocol, framed or not: what
// NOSASL clients send) gets ErrNOSASL as a TApplicationException of type
// UNSUPPORTED_CLIENT_TYPE for its method and sequence id, which every
// client shows as the call's error; anything else is closed without a
// reply. The returned error says which.
func refuse(r *bufio.Reader, c net.Conn) error {
	name, seqid, framed, ok := thriftCall(r)
	if !ok {
		b, _ := r.Peek(1)
		return fmt.Errorf("%w: first byte %#x is no SASL, HTTP or Thrift message", ErrNotSASL, b)
	}
	w := proto.NewBinaryWriter(make([]byte, 4, 256)) // room for a frame length
	w.WriteMessageBegin(name, proto.Exception, seqid)
	_ = proto.NewApplicationException(proto.ExcUnsupportedClientType, ErrNOSASL.Error()).EncodeBinary(w)
	out := w.Bytes()
	if framed {
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	} else {
		out = out[4:]
	}
	if _, err := c.Write(out); err == nil {
		linger(r, c)
	}
	return fmt.Errorf("%w (call %s)", ErrNOSASL, name)
}

// thriftCall reads the header of a strict binary Thrift message, framed
// or not, without consuming it: its method name and sequence id.
func thriftCall(r *bufio.Reader) (name string, seqid int32, framed, ok bool) {
	off := 0
	b, err := r.Peek(2)
	if err != nil {
		return "", 0, false, false
	}
	if b[0] != 0x80 || b[1] != 0x01 {
		if b, err = r.Peek(6); err != nil || b[4] != 0x80 || b[5] != 0x01 {
			return "", 0, false, false
		}
		off, framed = 4, true
	}
	if b, err = r.Peek(off + 8); err != nil {
		return "", 0, false, false
	}
	n := binary.BigEndian.Uint32(b[off+4:])
	if n > maxName {
		return "", 0, false, false
	}
	if b, err = r.Peek(off + 8 + int(n) + 4); err != nil {
		return "", 0, false, false
	}
	name = string(b[off+8 : off+8+int(n)])
	return name, int32(binary.BigEndian.Uint32(b[off+8+int(n):])), framed, true
}

// linger half-closes the connection after a refusal's reply and reads
// what the client still sends until it closes (at most 1 MiB, within the
// handshake's deadline): closing with the rest of its call unread would
// reset the connection, and a reset can drop the reply before the client
// reads it.
func linger(r io.Reader, c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r, 1<<20))
}
