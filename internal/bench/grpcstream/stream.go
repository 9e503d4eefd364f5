package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
)

// maxMessage is the message cap every benchmark system runs with
// (internal/bench's maxMessage).
const maxMessage = 64 << 20

// rawCodec sends a *[]byte as it is and receives into one, reusing its
// capacity: no protobuf, so no marshalling cost gRPC's users would pay.
type rawCodec struct{}

func (rawCodec) Name() string { return "raw" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	p, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T, want *[]byte", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*p)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T, want *[]byte", v)
	}
	b := (*p)[:0]
	for _, d := range data {
		b = append(b, d.ReadOnlyData()...)
	}
	*p = b
	return nil
}

// pullMethod is the stream's full method name.
const pullMethod = "/atb.Stream/Pull"

// serviceDesc declares what protoc would generate from
// `service Stream { rpc Pull(Pull) returns (stream Chunk); }`.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: "atb.Stream",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Pull",
		Handler:       pullHandler,
		ServerStreams: true,
	}},
}

// request is the Pull message: count (u64) and size (u32), big-endian.
type request struct {
	count int64
	size  int
}

const requestLen = 12

func (r request) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(r.count))
	return binary.BigEndian.AppendUint32(b, uint32(r.size))
}

var errBadRequest = errors.New("grpc-stream: bad request")

func decodeRequest(b []byte) (request, error) {
	if len(b) != requestLen {
		return request{}, fmt.Errorf("%w: %d bytes, want %d", errBadRequest, len(b), requestLen)
	}
	r := request{count: int64(binary.BigEndian.Uint64(b)), size: int(binary.BigEndian.Uint32(b[8:]))}
	if r.count < 0 || r.size > maxMessage {
		return request{}, fmt.Errorf("%w: count %d, size %d (at most %d)", errBadRequest, r.count, r.size, maxMessage)
	}
	return r, nil
}

// payload is internal/bench.Payload: the bytes every system sends.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + 7)
	}
	return b
}

func pullHandler(_ any, ss grpc.ServerStream) error {
	var in []byte
	if err := ss.RecvMsg(&in); err != nil {
		return err
	}
	req, err := decodeRequest(in)
	if err != nil {
		return err
	}
	p := payload(req.size)
	for i := int64(0); i < req.count; i++ {
		if err := ss.SendMsg(&p); err != nil {
			return err
		}
	}
	return nil
}

func newServer() *grpc.Server {
	s := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))
	s.RegisterService(&serviceDesc, struct{}{})
	return s
}

// result is one measured stream (internal/bench's StreamResult).
type result struct {
	Messages int64         `json:"messages"`
	Bytes    int64         `json:"bytes"`
	Elapsed  time.Duration `json:"elapsed_ns"`
}

var errMismatch = errors.New("grpc-stream: message differs from what the server sends")

// pull opens one stream of count messages of size bytes and reads it to
// the end, checking each message's length and ends.
func pull(ctx context.Context, conn *grpc.ClientConn, size int, count int64) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // releases the stream if it ends early
	start := time.Now()
	st, err := conn.NewStream(ctx, &serviceDesc.Streams[0], pullMethod)
	if err != nil {
		return result{}, err
	}
	req := request{count: count, size: size}.encode()
	if err := st.SendMsg(&req); err != nil {
		return result{}, err
	}
	if err := st.CloseSend(); err != nil {
		return result{}, err
	}
	want := payload(min(size, 1))
	var (
		buf []byte
		res result
	)
	for {
		err := st.RecvMsg(&buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
		if len(buf) != size || (size > 0 && (buf[0] != want[0] || buf[size-1] != byte((size-1)*31+7))) {
			return res, fmt.Errorf("%w: message %d of %d bytes, want %d", errMismatch, res.Messages, len(buf), size)
		}
		res.Messages++
		res.Bytes += int64(len(buf))
	}
	res.Elapsed = time.Since(start)
	if res.Messages != count {
		return res, fmt.Errorf("%w: %d messages, want %d", errMismatch, res.Messages, count)
	}
	return res, nil
}

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(maxMessage)))
}

// measure reads an unmeasured stream of warmup messages, then measures one
// of count messages, on one connection.
func measure(ctx context.Context, addr string, size int, count, warmup int64) (result, error) {
	conn, err := dial(addr)
	if err != nil {
		return result{}, err
	}
	defer conn.Close()
	if warmup > 0 {
		if _, err := pull(ctx, conn, size, warmup); err != nil {
			return result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	return pull(ctx, conn, size, count)
}
