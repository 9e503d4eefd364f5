package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// RawThrift is raw-tcp-batch's layout carrying real Thrift: framed
// binary messages (strict header, "echo", the seqid naming the caller, a
// struct with the payload as binary field 1; the reply's field 0), every
// message parsed and checked, the reply encoded afresh. No framework:
// no contexts, deadlines, metrics, pools, budgets, metadata or generated
// code. It is the floor of what a Thrift echo in Go costs over the
// floor's batching (issue 47 goal 4: where HatRPC's distance from
// raw-tcp-batch goes, Thrift's own work or the framework's).
//
// The server answers the whole frames of each read with one write,
// handling them inline on the connection's goroutine; the callers share
// rawBatchConns connections through the coalescing wire.Writer, and each
// connection's reader parses replies in its read buffer and copies the
// payload into the waiting caller's buffer (the one copy raw-tcp-batch
// makes too).
type RawThrift struct{}

// Name is "raw-thrift-batch".
func (RawThrift) Name() string { return "raw-thrift-batch" }

// rawThriftBuf is the read buffer of both sides; a frame that does not
// fit is refused (the atb sizes stop at 64 KiB on TCP's batch layout).
const rawThriftBuf = 256 << 10

const (
	thriftVersion = 0x80010000
	thriftCall    = 1
	thriftReply   = 2
	thriftBinary  = 11 // TType STRING
	thriftStop    = 0
)

var errRawThrift = errors.New("bench: bad thrift message")

// appendThriftEcho appends a framed message of type typ: "echo", seqid,
// a struct whose field id holds payload.
func appendThriftEcho(b []byte, typ uint32, seqid uint32, id int16, payload []byte) []byte {
	const name = "echo"
	size := 4 + 4 + len(name) + 4 + 1 + 2 + 4 + len(payload) + 1
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint32(b, thriftVersion|typ)
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, seqid)
	b = append(b, thriftBinary)
	b = binary.BigEndian.AppendUint16(b, uint16(id))
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return append(b, thriftStop)
}

// parseThriftEcho checks msg (a frame's body) is an echo message of type
// typ with field id, and returns its seqid and payload (in msg).
func parseThriftEcho(msg []byte, typ uint32, id int16) (uint32, []byte, error) {
	// version and type, "echo", seqid, field header, length, stop
	if len(msg) < 4+8+4+7+1 || binary.BigEndian.Uint32(msg) != thriftVersion|typ {
		return 0, nil, fmt.Errorf("%w: header", errRawThrift)
	}
	if binary.BigEndian.Uint32(msg[4:]) != 4 || string(msg[8:12]) != "echo" {
		return 0, nil, fmt.Errorf("%w: name", errRawThrift)
	}
	seqid := binary.BigEndian.Uint32(msg[12:])
	f := msg[16:]
	if f[0] != thriftBinary || int16(binary.BigEndian.Uint16(f[1:])) != id {
		return 0, nil, fmt.Errorf("%w: field", errRawThrift)
	}
	size := int(binary.BigEndian.Uint32(f[3:]))
	if size != len(f)-7-1 || f[len(f)-1] != thriftStop {
		return 0, nil, fmt.Errorf("%w: length", errRawThrift)
	}
	return seqid, f[7 : 7+size], nil
}

// nextFrame returns the next whole frame's body buffered in br, without
// reading (ok false: none is whole yet).
func nextFrame(br *bufio.Reader) (body []byte, ok bool, err error) {
	if br.Buffered() < 4 {
		return nil, false, nil
	}
	hdr, _ := br.Peek(4)
	size := int(binary.BigEndian.Uint32(hdr))
	if 4+size > rawThriftBuf {
		return nil, false, errRawTooLarge
	}
	if br.Buffered() < 4+size {
		return nil, false, nil
	}
	b, _ := br.Peek(4 + size)
	return b[4:], true, nil
}

// fill reads at least one more byte into br.
func fill(br *bufio.Reader) error {
	_, err := br.Peek(br.Buffered() + 1)
	return err
}

func (RawThrift) Serve(_ context.Context, addr string) (Server, error) {
	return serveRaw(addr, rawThriftServe)
}

// rawThriftServe answers every whole call in its read buffer, then writes
// the replies with one write.
func rawThriftServe(c net.Conn) {
	br := bufio.NewReaderSize(c, rawThriftBuf)
	out := make([]byte, 0, rawThriftBuf)
	for {
		if err := fill(br); err != nil {
			return
		}
		for {
			body, ok, err := nextFrame(br)
			if err != nil {
				return
			}
			if !ok {
				break
			}
			seqid, payload, err := parseThriftEcho(body, thriftCall, 1)
			if err != nil {
				return
			}
			out = appendThriftEcho(out, thriftReply, seqid, 0, payload)
			_, _ = br.Discard(4 + len(body))
		}
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
	}
}

// rawThriftConn is one of the callers' shared connections.
type rawThriftConn struct {
	rawLink
	br   *bufio.Reader
	w    *wire.Writer
	call []*rawThriftCaller
}

type rawThriftCaller struct {
	m     *rawThriftConn
	id    uint32
	frame []byte
	rep   []byte
	ready chan struct{}
	owner bool
}

func (RawThrift) Callers(ctx context.Context, addr string, n int) ([]Caller, error) {
	return spreadCallers(ctx, addr, n, rawThriftCallers)
}

// rawThriftCallers opens one connection for n callers, seqids 0..n-1.
func rawThriftCallers(ctx context.Context, addr string, n int) ([]Caller, error) {
	c, err := rawDial(ctx, addr)
	if err != nil {
		return nil, err
	}
	m := &rawThriftConn{rawLink: rawLink{c: c, done: make(chan struct{})},
		br: bufio.NewReaderSize(c, rawThriftBuf), w: wire.NewWriter(c, nil), call: make([]*rawThriftCaller, n)}
	out := make([]Caller, n)
	for j := range n {
		tc := &rawThriftCaller{m: m, id: uint32(j), ready: make(chan struct{}, 1), owner: j == 0}
		m.call[j] = tc
		out[j] = tc
	}
	go m.read()
	return out, nil
}

// read parses each reply in the read buffer and copies its payload to
// the caller its seqid names.
func (m *rawThriftConn) read() {
	defer close(m.done)
	for {
		body, ok, err := nextFrame(m.br)
		if err == nil && !ok {
			err = fill(m.br)
		}
		if err != nil {
			m.err = err
			return
		}
		if !ok {
			continue
		}
		seqid, payload, err := parseThriftEcho(body, thriftReply, 0)
		if err == nil && seqid >= uint32(len(m.call)) {
			err = fmt.Errorf("%w: seqid %d", errRawThrift, seqid)
		}
		if err != nil {
			m.err = err
			return
		}
		tc := m.call[seqid]
		tc.rep = append(tc.rep[:0], payload...)
		_, _ = m.br.Discard(4 + len(body))
		tc.ready <- struct{}{}
	}
}

func (c *rawThriftCaller) Echo(ctx context.Context, payload []byte) ([]byte, error) {
	if 4+len(payload)+32 > rawThriftBuf {
		return nil, errRawTooLarge
	}
	c.frame = appendThriftEcho(c.frame[:0], thriftCall, c.id, 1, payload)
	if err := c.m.w.Write(c.frame); err != nil {
		return nil, err
	}
	if err := c.m.await(ctx, c.ready); err != nil {
		return nil, err
	}
	return c.rep, nil
}

func (c *rawThriftCaller) Close() error { return c.m.closeBy(c.owner) }

func init() { Register(RawThrift{}) }
