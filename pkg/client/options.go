package client

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Option configures a Conn.
type Option func(*options)

type options struct {
	proto            proto.Protocol
	framed           bool
	formatSet        bool // framing or protocol given: no probing (detect.go)
	tls              *tls.Config
	dialTimeout      time.Duration
	handshakeTimeout time.Duration
	callTimeout      time.Duration
	interceptors     []Interceptor
	streams          streamOptions // stream.go
	multiplexed      bool
	noUpgrade        bool
	limits           proto.Limits
	hints            []*hints.Service
	dial             func(ctx context.Context, addr string) (net.Conn, error)
	writeTimeout     time.Duration
	rdma             string // provider for lanes: auto, shm, ibv; "off" disables
	rdmaDevice       string // WithRDMADevice; "" HATRPC_RDMA_DEVICE, else by route
	rdmaGID          string // WithRDMAGID; "" HATRPC_RDMA_GID, else auto
	rdmaSpec         fastpath.RDMASpec
	maxLanes         int // per function; 0: max(concurrency hint, defaultMaxLanes)
	laneProto        hints.Protocol
	svcLevel         bool
	conns            int  // TCP connections calls may spread over; see spread.go
	theader          bool // speak Apache's THeader transport (headers.go)
	outerFrame       bool // THeader inside TFramedTransport (WithFramedTHeader)
	zlib             bool // Apache's TZlibTransport (WithZlib)
	noRequestIDs     bool
	retryMin         time.Duration // fast path re-tried after a fallback: first wait
	retryMax         time.Duration // and the longest
	now              func() time.Time
	logger           *slog.Logger // nil: slog.Default() when logging
	retry            retryOptions // retry.go
	httpHeader       http.Header  // sent with every call over HTTP (http.go)
}

func defaultOptions() options {
	return options{
		proto:            proto.Binary,
		dialTimeout:      10 * time.Second,
		handshakeTimeout: 5 * time.Second,
		limits:           proto.DefaultLimits,
		writeTimeout:     30 * time.Second,
		rdma:             "auto",
		conns:            DefaultConns,
		retryMin:         time.Second,
		retryMax:         time.Minute,
		now:              time.Now,
		retry:            defaultRetryOptions(),
	}
}

// By default a Conn offers the handshake unframed in binary, Apache's
// defaults, and when the server hangs up on it, offers it framed, then in
// compact, then in JSON (each on a connection of its own): it finds a
// plain Thrift server's stack by itself and keeps it for reconnects. WithFramed,
// WithUnframed and WithProtocol (or WithCompact) fix the stack instead:
// nothing else is tried. A HatRPC server reads any stack, and WithoutUpgrade
// sends no handshake, so neither probes.

// WithFramed uses Thrift's framed transport (4-byte length prefix) for plain
// Thrift, and only it.
func WithFramed() Option { return func(o *options) { o.framed, o.formatSet = true, true } }

// WithUnframed uses the unframed (buffered) transport, and only it.
func WithUnframed() Option { return func(o *options) { o.framed, o.formatSet = false, true } }

// WithProtocol selects proto.Binary, proto.Compact or proto.JSON (Apache's
// TJSONProtocol), and only it. A JSON Conn speaks plain Thrift, unframed
// unless WithFramed: it sends no HatRPC handshake (as WithoutUpgrade), so
// against a HatRPC server too its calls stay on one TCP connection.
func WithProtocol(p proto.Protocol) Option {
	return func(o *options) { o.proto, o.formatSet = p, true }
}

// WithCompact is WithProtocol(proto.Compact).
func WithCompact() Option { return WithProtocol(proto.Compact) }

// WithTLS dials with crypto/tls using cfg.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithDialTimeout bounds connection setup (default 10s); the Dial context
// can only shorten it.
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithHandshakeTimeout bounds the capability handshake (default 5s).
func WithHandshakeTimeout(d time.Duration) Option {
	return func(o *options) { o.handshakeTimeout = d }
}

// WithCallTimeout applies d to calls whose context carries no deadline.
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// WithInterceptors appends interceptors; the first given runs outermost.
func WithInterceptors(ic ...Interceptor) Option {
	return func(o *options) { o.interceptors = append(o.interceptors, ic...) }
}

// WithMultiplexed sends "Service:method" names, as Apache's TMultiplexedProtocol.
func WithMultiplexed() Option { return func(o *options) { o.multiplexed = true } }

// WithZlib speaks Apache's TZlibTransport: the connection's bytes are
// zlib-compressed both ways, flushed after each message, with plain
// Thrift inside in the stack WithFramed, WithUnframed and WithProtocol
// choose (unframed binary by default, as Apache's Go test client over
// TZlibTransport). No probing and no HatRPC handshake: a HatRPC server
// reads it too, and calls stay on this connection, with no lanes.
func WithZlib() Option {
	return func(o *options) { o.zlib, o.formatSet, o.noUpgrade = true, true, true }
}

// WithoutUpgrade skips the capability handshake: the connection stays plain
// Thrift even against a HatRPC server.
func WithoutUpgrade() Option { return func(o *options) { o.noUpgrade = true } }

// WithLimits sets decoder limits for replies; MaxMessageSize bounds every
// request and stream message too. A MaxMessageSize below
// wire.MinMessageSize (4 KiB: the protocol's own frames must fit) fails
// Dial with an error matching ErrMessageLimit.
func WithLimits(l proto.Limits) Option { return func(o *options) { o.limits = l } }

// ErrMessageLimit matches (errors.Is) the error of Dial with a message
// limit below wire.MinMessageSize.
var ErrMessageLimit = wire.ErrMessageLimit

// WithHints registers generated hint tables so Plan can answer for methods
// that have not been called yet.
func WithHints(svcs ...*hints.Service) Option {
	return func(o *options) { o.hints = append(o.hints, svcs...) }
}

// WithLogger sends what a Conn logs (the fast path falling back to TCP,
// and coming back) to l instead of slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// log is the Conn's logger: WithLogger's, else slog.Default() (read when
// logging, so a later slog.SetDefault applies).
func (c *Conn) log() *slog.Logger {
	if c.o.logger != nil {
		return c.o.logger
	}
	return slog.Default()
}

// WithDialer replaces the TCP dialer (the TLS wrapping still applies).
func WithDialer(d func(ctx context.Context, addr string) (net.Conn, error)) Option {
	return func(o *options) { o.dial = d }
}

// WithWriteTimeout bounds how long a request write may block on a server
// that stops reading (default 30s); the connection then fails with
// ErrConnClosed and later calls reconnect.
func WithWriteTimeout(d time.Duration) Option { return func(o *options) { o.writeTimeout = d } }

// WithRDMA selects the verbs provider for lanes ("auto", "shm", "ibv"):
// when the server grants it in the handshake, each function whose hints
// allow it (transport auto, shm or rdma) runs on lanes of the HatRPC
// engine, with the protocol its client hints plan. On by default (auto);
// a server without lanes, or any Apache Thrift server, keeps every call on
// TCP. WithRDMA("off") keeps this Conn on TCP. Any other name fails Dial
// with an error matching ErrBadProvider.
func WithRDMA(provider string) Option { return func(o *options) { o.rdma = provider } }

// WithRDMADevice fixes the RDMA device (and port) of the Conn's lanes,
// spelt "mlx5_1" or "mlx5_1:1"; by default (and with HATRPC_RDMA_DEVICE
// unset) lanes use the device whose netdev holds the source address of the
// kernel's route to the server. A name or port the host lacks fails Dial
// with an error matching fastpath.ErrNoRDMAChoice listing what exists.
func WithRDMADevice(spec string) Option { return func(o *options) { o.rdmaDevice = spec } }

// WithRDMAGID fixes the source GID: "auto" (the route's source address's
// GID, RoCE v2 first), "v2" or a GID table index; HATRPC_RDMA_GID sets it
// when the option is not given.
func WithRDMAGID(spec string) Option { return func(o *options) { o.rdmaGID = spec } }

// WithFastPathRetry sets how long a WithRDMA("auto") Conn whose fast path
// could not be set up (a server budget, a device error) stays on TCP before
// it tries again: first after min, each further failure doubling the wait
// up to max (defaults 1s and 1m).
func WithFastPathRetry(min, max time.Duration) Option {
	return func(o *options) { o.retryMin, o.retryMax = min, max }
}

// WithMaxLanes bounds the lanes (endpoint pairs, one call each at a time)
// a Conn opens per function; callers beyond it wait for a free lane. The
// default is the function's concurrency hint, at least 16. A function
// that may share (qp_sharing=auto, payloads not declared larger than half
// a FLOCK message, no batching) keeps lanes of their own for at most one
// caller per core, n permitting, and sends the callers past them through
// the process's FLOCK handle; requests too large for FLOCK still take
// lanes up to n.
func WithMaxLanes(n int) Option { return func(o *options) { o.maxLanes = n } }

// WithLaneProtocol forces the engine protocol of every request this Conn
// sends on lanes, whatever the hints plan (for comparisons such as
// `hatkv bench --protocol`); the server still answers by its own plan.
func WithLaneProtocol(p hints.Protocol) Option { return func(o *options) { o.laneProto = p } }

// WithServiceLevelHints plans every function of the WithHints services from
// its service-level hints only, ignoring function-level groups: the
// "service-level hints" configuration of the HatRPC evaluation, for
// comparisons (the server has the same option).
func WithServiceLevelHints() Option { return func(o *options) { o.svcLevel = true } }

// WithConns lets the Conn spread calls over up to n TCP connections to a
// HatRPC server (default DefaultConns; 1 keeps every call on one). The
// Conn dials one; the others are opened in the background only when many
// bytes are in flight (large calls, or many concurrent medium ones), and
// each call then takes the least busy connection. Calls under 64 KiB
// (request plus reply) use at most 4 of them. A lone caller and small
// calls stay on the first connection, whose writes coalesce. A plain
// Thrift server always gets exactly one connection.
func WithConns(n int) Option { return func(o *options) { o.conns = max(n, 1) } }

// WithHTTPHeader adds a header that every call of a Conn dialled with an
// http:// or https:// address sends (e.g. Authorization for a gateway);
// per-call headers come from pkg/metadata's outgoing context. It has no
// effect on other addresses.
func WithHTTPHeader(key, value string) Option {
	return func(o *options) {
		if o.httpHeader == nil {
			o.httpHeader = http.Header{}
		}
		o.httpHeader.Add(key, value)
	}
}
