package rdma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/hatrpc/hatrpc/pkg/internal/transport"
)

// RemoteBuffer is a region a peer may access one-sidedly.
type RemoteBuffer struct {
	Addr uint64
	RKey uint32
	Len  uint64
}

// Endpoint is one side's connection attributes, exchanged at bootstrap.
type Endpoint struct {
	Provider string
	QPN      uint32
	PSN      uint32
	LID      uint32
	GID      [16]byte
	GIDIndex int32
	MTU      uint32
	Blob     []byte // provider private (shm: how to map the peer's memory)
	Buffers  []RemoteBuffer
}

// Bootstrap message format (big endian), version 1:
//
//	u32 length of the rest | "HRBS" | u8 version | u8 provider | u16 flags(0)
//	u32 qpn | u32 psn | u32 lid | i32 gid index | u32 mtu | [16] gid
//	u8 blob length | blob | u16 buffer count | count × (u64 addr, u32 rkey, u64 len)
const (
	bootstrapVersion = 1
	maxBlob          = 64
	maxBuffers       = 256
	fixedLen         = 4 + 1 + 1 + 2 + 5*4 + 16 + 1 + 2
	bufferLen        = 8 + 4 + 8
	maxMessage       = fixedLen + maxBlob + maxBuffers*bufferLen
)

// ErrBadBootstrap matches every bootstrap decoding failure.
var ErrBadBootstrap = errors.New("rdma: bad bootstrap message")

// ErrBootstrapVersion is an unsupported version (also matches ErrBadBootstrap).
var ErrBootstrapVersion = fmt.Errorf("%w: unsupported version", ErrBadBootstrap)

// MarshalBinary encodes the endpoint without the length prefix.
func (e *Endpoint) MarshalBinary() ([]byte, error) {
	prov := transport.ProviderByName(e.Provider)
	if prov == nil || len(e.Blob) > maxBlob || len(e.Buffers) > maxBuffers {
		return nil, fmt.Errorf("%w: endpoint out of range", ErrBadBootstrap)
	}
	b := make([]byte, 0, fixedLen+len(e.Blob)+len(e.Buffers)*bufferLen)
	b = append(b, "HRBS"...)
	b = append(b, bootstrapVersion, prov.ID, 0, 0)
	b = binary.BigEndian.AppendUint32(b, e.QPN)
	b = binary.BigEndian.AppendUint32(b, e.PSN)
	b = binary.BigEndian.AppendUint32(b, e.LID)
	b = binary.BigEndian.AppendUint32(b, uint32(e.GIDIndex))
	b = binary.BigEndian.AppendUint32(b, e.MTU)
	b = append(b, e.GID[:]...)
	b = append(b, byte(len(e.Blob)))
	b = append(b, e.Blob...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.Buffers)))
	for _, r := range e.Buffers {
		b = binary.BigEndian.AppendUint64(b, r.Addr)
		b = binary.BigEndian.AppendUint32(b, r.RKey)
		b = binary.BigEndian.AppendUint64(b, r.Len)
	}
	return b, nil
}

// DecodeEndpoint decodes MarshalBinary's output, checking every length.
func DecodeEndpoint(b []byte) (Endpoint, error) {
	var e Endpoint
	bad := func(what string) (Endpoint, error) {
		return Endpoint{}, fmt.Errorf("%w: %s", ErrBadBootstrap, what)
	}
	if len(b) < fixedLen {
		return bad("truncated header")
	}
	if string(b[:4]) != "HRBS" {
		return bad("bad magic")
	}
	if b[4] != bootstrapVersion {
		return Endpoint{}, fmt.Errorf("%w %d", ErrBootstrapVersion, b[4])
	}
	prov := transport.ProviderByID(b[5])
	if prov == nil {
		return bad("unknown provider")
	}
	if b[6] != 0 || b[7] != 0 {
		return bad("unknown flags")
	}
	e.Provider = prov.Name
	p := b[8:]
	e.QPN = binary.BigEndian.Uint32(p[0:])
	e.PSN = binary.BigEndian.Uint32(p[4:])
	e.LID = binary.BigEndian.Uint32(p[8:])
	e.GIDIndex = int32(binary.BigEndian.Uint32(p[12:]))
	e.MTU = binary.BigEndian.Uint32(p[16:])
	copy(e.GID[:], p[20:36])
	bl := int(p[36])
	p = p[37:]
	if bl > maxBlob {
		return bad("blob too long")
	}
	if len(p) < bl+2 {
		return bad("truncated blob")
	}
	if bl > 0 {
		e.Blob = append([]byte(nil), p[:bl]...)
	}
	p = p[bl:]
	n := int(binary.BigEndian.Uint16(p))
	p = p[2:]
	if n > maxBuffers {
		return bad("too many buffers")
	}
	if len(p) != n*bufferLen {
		return bad("buffer list length mismatch")
	}
	if n > 0 {
		e.Buffers = make([]RemoteBuffer, n)
	}
	for i := range e.Buffers {
		e.Buffers[i] = RemoteBuffer{
			Addr: binary.BigEndian.Uint64(p),
			RKey: binary.BigEndian.Uint32(p[8:]),
			Len:  binary.BigEndian.Uint64(p[12:]),
		}
		p = p[bufferLen:]
	}
	return e, nil
}

// deadlineFrom applies ctx's deadline to conn and makes cancellation
// interrupt blocked I/O; the returned func undoes both.
func deadlineFrom(ctx context.Context, conn net.Conn) func() {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		_ = conn.SetDeadline(time.Time{})
	}
}

// ExchangeEndpoints sends local and reads the peer's endpoint over conn.
func ExchangeEndpoints(ctx context.Context, conn net.Conn, local Endpoint) (Endpoint, error) {
	msg, err := local.MarshalBinary()
	if err != nil {
		return Endpoint{}, err
	}
	defer deadlineFrom(ctx, conn)()
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(msg)), uint32(len(msg)))
	out = append(out, msg...)
	werr := make(chan error, 1)
	// Write concurrently: both sides write first, and an unbuffered
	// transport (net.Pipe) would otherwise deadlock.
	go func() { _, err := conn.Write(out); werr <- err }()
	peer, rerr := readEndpoint(conn)
	if err := <-werr; err != nil {
		return Endpoint{}, ctxErr(ctx, fmt.Errorf("rdma: bootstrap write: %w", err))
	}
	if rerr != nil {
		return Endpoint{}, ctxErr(ctx, rerr)
	}
	return peer, nil
}

func ctxErr(ctx context.Context, err error) error {
	if _, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) {
		// The conn deadline is ctx's: its timer fires at the same instant.
		<-ctx.Done()
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

func readEndpoint(r io.Reader) (Endpoint, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Endpoint{}, fmt.Errorf("rdma: bootstrap read: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxMessage {
		return Endpoint{}, fmt.Errorf("%w: message of %d bytes", ErrBadBootstrap, n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Endpoint{}, fmt.Errorf("rdma: bootstrap read: %w", err)
	}
	return DecodeEndpoint(buf)
}

// Bootstrap connects qp to the QP at the other end of conn: both sides
// exchange endpoints (exposing buffers), connect, then confirm readiness so
// neither sends before the other can receive. It returns the peer endpoint.
func (qp *QP) Bootstrap(ctx context.Context, conn net.Conn, buffers ...RemoteBuffer) (Endpoint, error) {
	local, err := qp.Endpoint(buffers...)
	if err != nil {
		return Endpoint{}, err
	}
	peer, err := ExchangeEndpoints(ctx, conn, local)
	if err != nil {
		return Endpoint{}, err
	}
	if err := qp.Connect(peer); err != nil {
		return Endpoint{}, err
	}
	defer deadlineFrom(ctx, conn)()
	werr := make(chan error, 1)
	go func() { _, err := conn.Write([]byte{'R'}); werr <- err }()
	var b [1]byte
	_, rerr := io.ReadFull(conn, b[:])
	if err := <-werr; err != nil {
		return Endpoint{}, ctxErr(ctx, fmt.Errorf("rdma: bootstrap ready: %w", err))
	}
	if rerr != nil || b[0] != 'R' {
		return Endpoint{}, ctxErr(ctx, fmt.Errorf("%w: no ready marker (%v)", ErrBadBootstrap, rerr))
	}
	return peer, nil
}
