package emul

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Kind names a protocol emulation.
type Kind uint8

// The four emulations of the HatRPC evaluation (§5.4).
const (
	ARGRPC Kind = iota + 1
	HERD
	Pilaf
	RFP
)

var kindNames = map[Kind]string{ARGRPC: "argrpc", HERD: "herd", Pilaf: "pilaf", RFP: "rfp"}

// Kinds lists every emulation.
func Kinds() []Kind { return []Kind{ARGRPC, HERD, Pilaf, RFP} }

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind maps "argrpc", "herd", "pilaf" or "rfp" to a Kind.
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if n == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want argrpc, herd, pilaf or rfp)", ErrUnknownKind, s)
}

// Errors. Failures of the RDMA layer are *rdma.Error (errors.Is against
// rdma.Status values) wrapped with the operation.
var (
	// ErrUnknownKind is an emulation name or hello byte nobody knows.
	ErrUnknownKind = errors.New("emul: unknown emulation")
	// ErrBadHello is a connection that did not start with an emulation hello.
	ErrBadHello = errors.New("emul: bad hello")
	// ErrRefused is the server turning the hello down.
	ErrRefused = errors.New("emul: refused by server")
	// ErrServerClosed is ServeConn on (or a connection cut by) a closed Server.
	ErrServerClosed = errors.New("emul: server closed")
	// ErrClosed is a call on a closed Client.
	ErrClosed = errors.New("emul: client closed")
	// ErrPeerGone is a call whose connection's peer went away.
	ErrPeerGone = errors.New("emul: peer went away")
	// ErrProtocol is a malformed request or response.
	ErrProtocol = errors.New("emul: malformed message")
	// ErrNotFound is a read of an absent key (YCSB counts it as failed).
	ErrNotFound = errors.New("emul: key not found")
	// ErrInvalid is a request the store refused as invalid.
	ErrInvalid = errors.New("emul: invalid request")
	// ErrStoreFull is the store out of space.
	ErrStoreFull = errors.New("emul: store full")
	// ErrRemote is any other server-side failure.
	ErrRemote = errors.New("emul: server error")
)

// The hello a client sends before the RDMA bootstrap:
//
//	"HKEM" | u8 version | u8 kind | u8 server polling (0 busy, 1 event)
//
// answered by one byte: 0 accepted, else a refusal code.
const (
	helloMagic   = "HKEM"
	helloVersion = 1
	helloLen     = 7
	helloOK      = 0
	helloBadKind = 1
	helloClosed  = 2
)

type hello struct {
	kind    Kind
	polling rdma.Polling
}

// ioDeadline applies ctx to blocking I/O on nc; the returned func undoes it.
func ioDeadline(ctx context.Context, nc net.Conn) func() {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		_ = nc.SetDeadline(time.Time{})
	}
}

func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

func writeHello(ctx context.Context, nc net.Conn, h hello) error {
	defer ioDeadline(ctx, nc)()
	b := []byte(helloMagic + "\x00\x00\x00")
	b[4], b[5], b[6] = helloVersion, byte(h.kind), byte(h.polling)
	if _, err := nc.Write(b); err != nil {
		return ctxOr(ctx, fmt.Errorf("emul: hello: %w", err))
	}
	var ack [1]byte
	if _, err := io.ReadFull(nc, ack[:]); err != nil {
		return ctxOr(ctx, fmt.Errorf("emul: hello ack: %w", err))
	}
	switch ack[0] {
	case helloOK:
		return nil
	case helloBadKind:
		return fmt.Errorf("%w: emulation %v not served", ErrRefused, h.kind)
	case helloClosed:
		return fmt.Errorf("%w: %w", ErrRefused, ErrServerClosed)
	}
	return fmt.Errorf("%w: code %d", ErrRefused, ack[0])
}

// readHello reads the client's hello; a well-formed hello naming an
// unknown emulation is refused on the wire before the error is returned.
func readHello(ctx context.Context, nc net.Conn) (hello, error) {
	defer ioDeadline(ctx, nc)()
	var b [helloLen]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil {
		return hello{}, ctxOr(ctx, fmt.Errorf("%w: %w", ErrBadHello, err))
	}
	if string(b[:4]) != helloMagic || b[4] != helloVersion || b[6] > 1 {
		return hello{}, fmt.Errorf("%w: % x", ErrBadHello, b[:])
	}
	h := hello{kind: Kind(b[5]), polling: rdma.Polling(b[6])}
	if _, ok := kindNames[h.kind]; !ok {
		_, _ = nc.Write([]byte{helloBadKind})
		return hello{}, fmt.Errorf("%w: %d", ErrUnknownKind, b[5])
	}
	return h, nil
}

func ackHello(ctx context.Context, nc net.Conn, code byte) error {
	defer ioDeadline(ctx, nc)()
	if _, err := nc.Write([]byte{code}); err != nil {
		return ctxOr(ctx, fmt.Errorf("emul: hello ack: %w", err))
	}
	return nil
}

// Protocol choices per emulation, on the side that sends the message.
const arEagerMax = 4 << 10 // AR-gRPC's eager threshold: eager strictly below

func requestProto(k Kind, p rdma.Polling, n int) rdma.Protocol {
	switch k {
	case ARGRPC:
		return arProto(n)
	case HERD:
		// A busy server polls its pre-known buffer: the RFP request path
		// (a plain WRITE) with the client held in server-reply mode. An
		// event-driven server cannot watch memory; the RFP path would post
		// WRITE_WITH_IMM, which is Direct-WriteIMM without the mode machine.
		if p == rdma.PollEvent {
			return rdma.ProtoDirectWriteIMM
		}
		return rdma.ProtoRFP
	case RFP:
		return rdma.ProtoRFP
	}
	return rdma.ProtoHybrid
}

func responseProto(k Kind, n int) rdma.Protocol {
	switch k {
	case ARGRPC:
		return arProto(n)
	case HERD:
		return rdma.ProtoEager
	case RFP:
		return rdma.ProtoRFP
	}
	return rdma.ProtoHybrid
}

func arProto(n int) rdma.Protocol {
	if n < arEagerMax {
		return rdma.ProtoEager
	}
	return rdma.ProtoReadRNDV
}

// endpointConfig is shared by both sides. Slots are 4 KiB: AR-gRPC's eager
// messages (< 4 KiB) fit one, as do HERD's small responses.
//
// R, the RFP fetch retries, decides the RFP and HERD clients' mode. RFP:
// 2^20, since a shm READ costs ~100 ns and the hardware default (5) would
// switch to server-reply almost at once; RFP would no longer be RFP. HERD:
// 1, so the client leaves fetch mode after two calls (Dial makes them), and
// RFPStayReply keeps it in server-reply mode from then on, however fast the
// server or slow a fetch (a loaded host, or emulated verbs, where one READ
// takes ~100 us). In server-reply mode a request is still one RDMA WRITE
// into the server's polled buffer, without the fetch flag, and the server
// answers by SEND: HERD's protocol.
func endpointConfig(k Kind, p rdma.Polling) rdma.EndpointConfig {
	r := 1 << 20
	if k == HERD {
		r = 1
	}
	return rdma.EndpointConfig{
		SlotSize: 4 << 10, Slots: 16, DirectSize: 64 << 10, RespSize: 64 << 10,
		EagerThreshold: arEagerMax, Polling: p, RFPRetries: r, RFPFetchSize: 256, RFPStayReply: k == HERD,
		MaxMessage: 16 << 20, PoolSize: 256 << 10,
	}
}
