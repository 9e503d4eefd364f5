package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/internal/bench/gen/atbstream"
	"github.com/hatrpc/hatrpc/internal/bench/gen/atbstream/atbstreamserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// The stream systems (issue 46's goals): a server sends Count messages of
// Size bytes to one client over one stream, and the client times them
// from opening the stream to its end. Their names:
//
//   - hatrpc-stream: HatRPC's server stream (idl/atbstream.thrift's pull,
//     generated code) over one TCP Conn.
//   - hatrpc-stream-lanes: the same with shm/RDMA lanes on (server and
//     client WithRDMA, provider from HATRPC_PROVIDER): a server stream
//     on a lane of its own (docs/design/streams.md); a run whose stream
//     found no lane is an error, not a TCP figure.
//   - hatrpc-unary: the same messages as unary calls (fetch), one caller
//     in a closed loop: the small-message goal's comparison.
//   - raw-tcp-stream: the floor of the same bytes over loopback TCP with
//     Go's net package: a 4-byte length per message, writes of whole
//     batches of prebuilt frames (one write per frame from 64 KiB up),
//     reads through a 256 KiB buffer into one reused buffer.
//   - memmove: no network; copy of the same bytes, each message from a
//     source buffer holding all of them into one message-sized buffer,
//     on one core (Go's copy is the runtime's memmove).
//   - grpc-stream: gRPC-Go server streaming (stream_grpc.go), an external
//     program.

// StreamSpec is one stream to measure.
type StreamSpec struct {
	Size  int   `json:"size"`  // bytes per message
	Count int64 `json:"count"` // messages
	// Warmup is the messages of an unmeasured stream (or calls) first, on
	// the same connection.
	Warmup int64 `json:"warmup"`
	// MaxDur ends a unary run early (hatrpc-unary: one call per message
	// would take minutes at 64 B); the result counts the calls made.
	MaxDur time.Duration `json:"max_dur_ns,omitempty"`
}

// StreamResult is one measured stream (or run of unary calls).
type StreamResult struct {
	Messages int64         `json:"messages"`
	Bytes    int64         `json:"bytes"`
	Elapsed  time.Duration `json:"elapsed_ns"`
}

// MsgsPerSec is messages (or calls) per second.
func (r StreamResult) MsgsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

// MBPerSec is payload bytes per second in MB (10^6).
func (r StreamResult) MBPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds() / 1e6
}

// streamer is a system that measures streams in this process.
type streamer interface {
	System
	measureStream(ctx context.Context, addr string, spec StreamSpec) (StreamResult, error)
}

// serverless is a system with no server (memmove): the driver starts no
// server process for it.
type serverless interface{ serverless() }

// ErrNotStream is returned when a stream is asked of an echo system or
// echo calls of a stream system.
var ErrNotStream = errors.New("bench: not a stream system")

// IsStream reports whether name is a stream system.
func IsStream(name string) bool {
	s, err := Lookup(name)
	if err != nil {
		return false
	}
	switch s.(type) {
	case streamer, GRPCStream:
		return true
	}
	return false
}

// ErrStreamMismatch means a message did not carry what the server sends.
var ErrStreamMismatch = errors.New("bench: stream message differs from what was sent")

// checkChunk is checkEcho for stream messages: length and both ends.
func checkChunk(want, got []byte, i int64) error {
	if len(want) != len(got) || (len(want) > 0 && (want[0] != got[0] || want[len(want)-1] != got[len(got)-1])) {
		return fmt.Errorf("%w: message %d has %d bytes, want %d", ErrStreamMismatch, i, len(got), len(want))
	}
	return nil
}

func runStreamClient(ctx context.Context, sys System, spec ClientSpec) (ClientResult, error) {
	s, ok := sys.(streamer)
	if !ok {
		return ClientResult{}, fmt.Errorf("%w: %s", ErrNotStream, sys.Name())
	}
	if err := spec.Stream.validate(); err != nil {
		return ClientResult{}, err
	}
	res, err := s.measureStream(ctx, spec.Addr, *spec.Stream)
	if err != nil {
		return ClientResult{}, fmt.Errorf("%s: %w", sys.Name(), err)
	}
	return ClientResult{Spec: spec, Stream: &res}, nil
}

func (s StreamSpec) validate() error {
	if s.Size < 0 || s.Size > maxMessage || s.Count < 1 || s.Warmup < 0 {
		return fmt.Errorf("bench: bad stream spec: size %d (0..%d), count %d (>= 1), warm-up %d (>= 0)", s.Size, maxMessage, s.Count, s.Warmup)
	}
	return nil
}

// payloads caches Payload(n) per size: servers send the same bytes for
// every message.
var payloads sync.Map // int -> []byte

func payloadOf(n int) []byte {
	if p, ok := payloads.Load(n); ok {
		return p.([]byte)
	}
	p, _ := payloads.LoadOrStore(n, Payload(n))
	return p.([]byte)
}

// HatStream is HatRPC's server stream (or, Unary, the same messages as
// unary calls) on the generated atbstream service.
type HatStream struct {
	Unary bool
	Lanes bool
}

// Name is "hatrpc-stream", "hatrpc-stream-lanes" or "hatrpc-unary".
func (h HatStream) Name() string {
	switch {
	case h.Unary:
		return "hatrpc-unary"
	case h.Lanes:
		return "hatrpc-stream-lanes"
	}
	return "hatrpc-stream"
}

type hatStreamHandler struct{}

func (hatStreamHandler) Pull(req *atbstream.Pull, st atbstream.StreamPullServer) error {
	if req.Size < 0 || int(req.Size) > maxMessage {
		return fmt.Errorf("bad size %d", req.Size)
	}
	// Send encodes the message into its frame before it returns, so one
	// Chunk serves every message.
	c := &atbstream.Chunk{Data: payloadOf(int(req.Size))}
	for i := int64(0); i < req.Count; i++ {
		if err := st.Send(c); err != nil {
			return err
		}
	}
	return nil
}

func (hatStreamHandler) Fetch(_ context.Context, req *atbstream.Pull) (*atbstream.Chunk, error) {
	if req.Size < 0 || int(req.Size) > maxMessage {
		return nil, fmt.Errorf("bad size %d", req.Size)
	}
	return &atbstream.Chunk{Data: payloadOf(int(req.Size))}, nil
}

// Serve starts a HatRPC server with the stream service on addr, with the
// echo systems' limits.
func (h HatStream) Serve(_ context.Context, addr string) (Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	lim := proto.DefaultLimits
	lim.MaxMessageSize, lim.MaxStringLength = maxMessage, maxMessage
	opts := []server.Option{server.WithLimits(lim), server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	if h.Lanes {
		opts = append(opts, server.WithRDMA(rdma.ProviderAuto))
	}
	srv := server.New(opts...)
	atbstreamserver.RegisterStream(srv, hatStreamHandler{})
	s := &hatServer{srv: srv, addr: ln.Addr().String(), served: make(chan error, 1)}
	go func() { s.served <- srv.Serve(ln) }()
	return s, nil
}

// Callers refuses: a stream system measures streams, not echo calls.
func (h HatStream) Callers(context.Context, string, int) ([]Caller, error) {
	return nil, fmt.Errorf("%w: %s has no echo callers (use -stream-sizes)", ErrNotStream, h.Name())
}

func (h HatStream) measureStream(ctx context.Context, addr string, spec StreamSpec) (StreamResult, error) {
	lanes := "off"
	if h.Lanes {
		lanes = rdma.ProviderAuto
	}
	conn, err := client.Dial(ctx, addr, client.WithHints(&atbstream.StreamHints), client.WithRDMA(lanes))
	if err != nil {
		return StreamResult{}, fmt.Errorf("hatrpc dial %s: %w", addr, err)
	}
	defer conn.Close()
	c := atbstream.NewStreamClient(conn)
	want := payloadOf(spec.Size)
	if h.Unary {
		return hatUnary(ctx, c, want, spec)
	}
	if spec.Warmup > 0 {
		if _, err := hatPull(ctx, c, want, spec.Warmup); err != nil {
			return StreamResult{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	res, err := hatPull(ctx, c, want, spec.Count)
	if lane, tcp := conn.StreamRoutes(); err == nil && h.Lanes && (lane == 0 || tcp > 0) {
		// No lane was free or none was granted: the figure would be TCP's.
		return res, fmt.Errorf("%s: %d streams on lanes, %d on TCP: want every stream on a lane", h.Name(), lane, tcp)
	}
	return res, err
}

func hatPull(ctx context.Context, c *atbstream.StreamClient, want []byte, count int64) (StreamResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // releases the stream if it ends early
	start := time.Now()
	st, err := c.Pull(ctx, &atbstream.Pull{Count: count, Size: int32(len(want))})
	if err != nil {
		return StreamResult{}, err
	}
	var res StreamResult
	m := new(atbstream.Chunk) // every message read into it: none allocated per message
	for {
		err := st.RecvInto(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
		if err := checkChunk(want, m.Data, res.Messages); err != nil {
			return res, err
		}
		res.Messages++
		res.Bytes += int64(len(m.Data))
	}
	res.Elapsed = time.Since(start)
	if res.Messages != count {
		return res, fmt.Errorf("%w: %d messages, want %d", ErrStreamMismatch, res.Messages, count)
	}
	return res, nil
}

// hatUnary makes Warmup calls, then calls until Count calls or MaxDur.
func hatUnary(ctx context.Context, c *atbstream.StreamClient, want []byte, spec StreamSpec) (StreamResult, error) {
	req := &atbstream.Pull{Size: int32(len(want))}
	for i := int64(0); i < spec.Warmup; i++ {
		if _, err := c.Fetch(ctx, req); err != nil {
			return StreamResult{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	var res StreamResult
	start := time.Now()
	var end time.Time
	if spec.MaxDur > 0 {
		end = start.Add(spec.MaxDur)
	}
	for res.Messages < spec.Count {
		m, err := c.Fetch(ctx, req)
		if err != nil {
			return res, err
		}
		if err := checkChunk(want, m.Data, res.Messages); err != nil {
			return res, err
		}
		res.Messages++
		res.Bytes += int64(len(m.Data))
		// A clock read every 64 calls: its cost stays out of the figure.
		if !end.IsZero() && res.Messages%64 == 0 && time.Now().After(end) {
			break
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// RawStream is the floor of a stream's bytes over loopback TCP.
type RawStream struct{}

// Name is "raw-tcp-stream".
func (RawStream) Name() string { return "raw-tcp-stream" }

// rawStreamReq is the request: count (u64) and size (u32).
const rawStreamReq = 12

// rawBatch is how many bytes of small frames go in one write.
const rawBatch = 256 << 10

// Serve starts the raw stream server: per connection, requests of
// rawStreamReq bytes, each answered with count frames.
func (RawStream) Serve(_ context.Context, addr string) (Server, error) {
	return serveRaw(addr, rawStreamServe)
}

// rawStreamServe answers each request with its frames: a batch of as
// many prebuilt frames as fit in rawBatch (at least one) per write, so
// neither a copy nor a header write happens per message.
func rawStreamServe(c net.Conn) {
	var req [rawStreamReq]byte
	for {
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		count := int64(binary.BigEndian.Uint64(req[:]))
		size := int(binary.BigEndian.Uint32(req[8:]))
		if size > maxMessage || count < 0 {
			return
		}
		frame := rawHdr + size
		per := max(rawBatch/frame, 1)
		batch := make([]byte, 0, per*frame)
		p := payloadOf(size)
		for range per {
			batch = binary.BigEndian.AppendUint32(batch, uint32(size))
			batch = append(batch, p...)
		}
		for left := count; left > 0; {
			n := min(left, int64(per))
			if _, err := c.Write(batch[:n*int64(frame)]); err != nil {
				return
			}
			left -= n
		}
	}
}

// Callers refuses: see HatStream.Callers.
func (r RawStream) Callers(context.Context, string, int) ([]Caller, error) {
	return nil, fmt.Errorf("%w: %s has no echo callers (use -stream-sizes)", ErrNotStream, r.Name())
}

func (RawStream) measureStream(ctx context.Context, addr string, spec StreamSpec) (StreamResult, error) {
	c, err := rawDial(ctx, addr)
	if err != nil {
		return StreamResult{}, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	r := bufio.NewReaderSize(c, rawBatch)
	want := payloadOf(spec.Size)
	buf := make([]byte, spec.Size)
	if spec.Warmup > 0 {
		if _, err := rawPull(c, r, want, buf, spec.Warmup); err != nil {
			return StreamResult{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	return rawPull(c, r, want, buf, spec.Count)
}

// rawPull reads each message into buf: a large one straight from the
// socket (bufio passes reads at least its size through), small ones
// out of the read buffer.
func rawPull(c net.Conn, r *bufio.Reader, want, buf []byte, count int64) (StreamResult, error) {
	start := time.Now()
	var req [rawStreamReq]byte
	binary.BigEndian.PutUint64(req[:], uint64(count))
	binary.BigEndian.PutUint32(req[8:], uint32(len(want)))
	if _, err := c.Write(req[:]); err != nil {
		return StreamResult{}, err
	}
	var (
		res StreamResult
		hdr [rawHdr]byte
	)
	for res.Messages < count {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return res, err
		}
		if n := binary.BigEndian.Uint32(hdr[:]); int(n) != len(want) {
			return res, fmt.Errorf("%w: message %d has %d bytes, want %d", ErrStreamMismatch, res.Messages, n, len(want))
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			return res, err
		}
		if err := checkChunk(want, buf, res.Messages); err != nil {
			return res, err
		}
		res.Messages++
		res.Bytes += int64(len(buf))
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// Memmove is the copy floor of a stream's bytes on one core.
type Memmove struct{}

// Name is "memmove".
func (Memmove) Name() string { return "memmove" }

func (Memmove) serverless() {}

// Serve starts nothing: memmove has no server.
func (Memmove) Serve(context.Context, string) (Server, error) { return nopServer{}, nil }

// Callers refuses: see HatStream.Callers.
func (m Memmove) Callers(context.Context, string, int) ([]Caller, error) {
	return nil, fmt.Errorf("%w: %s has no echo callers (use -stream-sizes)", ErrNotStream, m.Name())
}

// measureStream copies Count messages of Size bytes, each from its own
// place in a source holding all of them (so a 1 GiB stream reads 1 GiB,
// beyond any cache) into one destination buffer, as a receiver reusing
// its buffer would. The source is written before the clock starts, so
// its page faults are not timed.
func (Memmove) measureStream(ctx context.Context, _ string, spec StreamSpec) (StreamResult, error) {
	total := spec.Count * int64(spec.Size)
	src := make([]byte, total)
	p := payloadOf(spec.Size)
	for off := int64(0); off < total; off += int64(spec.Size) {
		copy(src[off:], p)
	}
	dst := make([]byte, spec.Size)
	copy(dst, p) // fault dst in
	var res StreamResult
	start := time.Now()
	for off := int64(0); res.Messages < spec.Count; off += int64(spec.Size) {
		copy(dst, src[off:off+int64(spec.Size)])
		res.Messages++
		// The context is checked every 4096 messages: often enough for a
		// canceled run, too rarely to cost anything.
		if res.Messages%4096 == 0 && ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	res.Elapsed = time.Since(start)
	res.Bytes = total
	if err := checkChunk(p, dst, res.Messages-1); err != nil {
		return res, err
	}
	return res, nil
}

type nopServer struct{}

func (nopServer) Addr() string               { return "-" }
func (nopServer) Stop(context.Context) error { return nil }

func init() {
	Register(HatStream{})
	Register(HatStream{Lanes: true})
	Register(HatStream{Unary: true})
	Register(RawStream{})
	Register(Memmove{})
}
