package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Option configures a Server.
type Option func(*options)

type options struct {
	logger       *slog.Logger
	registry     *prometheus.Registry
	debugAddr    string
	tls          *tls.Config
	maxConns     int
	maxCalls     int
	busyTimeout  time.Duration
	interceptors []Interceptor
	limits       proto.Limits
	noUpgrade    bool
	writeTimeout time.Duration
	rdma         string // "" off; else the provider lanes use (auto, shm, ibv)
	rdmaDevice   string // WithRDMADevice; "" HATRPC_RDMA_DEVICE, else by address
	rdmaGID      string // WithRDMAGID; "" HATRPC_RDMA_GID, else auto
	svcLevel     bool
	ownedArgs    bool
	dumpable     bool // keep the process dumpable when it serves shm (dumpable.go)

	// Connection time limits (timeouts.go); 0 disables each.
	handshakeTimeout time.Duration
	idleTimeout      time.Duration
	readGrace        time.Duration
	minReadRate      int  // bytes/s
	manualSweep      bool // tests drive the sweeper themselves

	// Request memory (budget.go).
	memBudget, memPerConn int64
	fastShare             float64        // WithFastPathShare
	containerLimits       map[string]int // method ("Service:method" or "method") -> max elements

	laneLimits LaneLimits // lanebudget.go

	limiters map[string]Limiter // method ("Service:method" or "method") -> rate limit (ratelimit.go)

	registrar Registrar // registrar.go

	streams streamOptions // stream.go
}

func defaultOptions() options {
	return options{
		logger:   slog.Default(),
		maxConns: 10000,
		maxCalls: 4096,
		limits:   proto.DefaultLimits,

		writeTimeout: 30 * time.Second,

		handshakeTimeout: DefaultHandshakeTimeout,
		idleTimeout:      DefaultIdleTimeout,
		readGrace:        DefaultReadGrace,
		minReadRate:      DefaultMinReadRate,

		memBudget:  DefaultMemoryBudget,
		fastShare:  DefaultFastPathShare,
		memPerConn: DefaultMemoryPerConn,
	}
}

// Defaults of the connection time limits and the request memory budget.
const (
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultReadGrace        = 10 * time.Second
	DefaultMinReadRate      = 4 << 10 // bytes/s
	DefaultMemoryBudget     = 256 << 20
	DefaultMemoryPerConn    = 64 << 20
)

// WithHandshakeTimeout bounds the time from accept until the connection's
// first message has arrived whole: the HatRPC handshake, or a plain
// Thrift client's first call (default 10s; 0 = none). A connection that
// sends nothing in that time is closed.
func WithHandshakeTimeout(d time.Duration) Option {
	return func(o *options) { o.handshakeTimeout = d }
}

// WithIdleTimeout closes a connection with no call in flight and nothing
// arriving for d (default 5m; 0 = never). A HatRPC client is sent a
// GoAway first and the connection closes a second later, so the client's
// next call opens a new connection instead of failing; a plain Thrift
// connection is simply closed (see docs/design/wire.md).
func WithIdleTimeout(d time.Duration) Option { return func(o *options) { o.idleTimeout = d } }

// WithMinReadRate bounds how slowly a message may arrive once its first
// byte has: after grace it must keep up with bytesPerSec on average since
// it started, and no grace may pass without any of its bytes arriving,
// else the connection is closed (defaults 10s, 4 KiB/s; grace 0 = no
// limit). This stops clients that hold a connection and its buffers by
// sending a frame a byte at a time, or most of one and then nothing.
func WithMinReadRate(grace time.Duration, bytesPerSec int) Option {
	return func(o *options) { o.readGrace, o.minReadRate = grace, bytesPerSec }
}

// WithMemoryBudget bounds the request memory the server holds: the
// buffers of requests of 64 KiB or more, from the moment their size is
// known until their call ends, across all connections (total, default
// 256 MiB) and per connection (perConn, default 64 MiB). A request that
// does not fit waits, and its connection is not read meanwhile (TCP
// back-pressure), until calls ending make room; with WithBusyTimeout it
// waits that long at most and gets a "server busy" exception. One that
// could never fit (larger than either bound) is refused like an oversized
// message. Every reply counts too, from when it is built until it is
// written (a call reserves its expected reply before it runs), so a
// connection whose client does not read its replies stops being read
// once it holds its share, and a reply larger than the share is refused
// with an exception (see replygate.go); a lane's replies and batches are
// charged to its connection the same way, and the fast path's
// connections together hold at most a share of total, by default a
// quarter (WithFastPathShare). A call
// reserves what its method's earlier replies took; a handler whose reply
// may be far larger reserves as it builds it (ReserveReply). total 0
// turns the budget off.
//
// The budget counts the buffers the server holds; the garbage they leave
// is the Go heap's, on top of it (with GOGC=100 the heap may grow to
// twice what is live before a collection). A process that must stay near
// the budget sets a soft memory limit of the budget and some headroom
// (debug.SetMemoryLimit or GOMEMLIMIT), as hatkv serve does (budget +
// 48 MiB, for a process bound of budget + 64 MiB: C allocations and the
// limit's overshoot are outside it): 64 Thrift-over-HTTP Scans of 11 MB
// replies grew hatkv by +318 MB with budget + 64 MiB and +1.3 GB
// without. The server does not set it: the limit is the whole process's.
func WithMemoryBudget(total, perConn int64) Option {
	return func(o *options) { o.memBudget, o.memPerConn = total, perConn }
}

// WithFastPathShare sets the share of WithMemoryBudget's total that the
// fast path's connections (dedicated lanes, FLOCK sessions) may hold
// together, a fraction in (0, 1] (default DefaultFastPathShare, a
// quarter): the rest stays for TCP clients, whose calls never wait for
// the fast path's replies and batches. A connection of the fast path
// may hold no more than this share (nor than perConn), so a lane's
// reply or batch larger than it is refused. A server whose clients are
// mostly on the fast path may give it more; 1 lets it take the whole
// budget. A value outside (0, 1] fails Serve with an error matching
// ErrBadOption.
func WithFastPathShare(share float64) Option {
	return func(o *options) { o.fastShare = share }
}

// DefaultFastPathShare is the fast path's share of the memory budget
// without WithFastPathShare (budget.go says why a quarter).
const DefaultFastPathShare = 0.25

// ErrBadOption matches (errors.Is) the error of Serve with an option
// value out of its range.
var ErrBadOption = errors.New("server: bad option")

// checkFastPathShare refuses a WithFastPathShare outside (0, 1] (NaN
// included).
func (o *options) checkFastPathShare() error {
	if !(o.fastShare > 0 && o.fastShare <= 1) {
		return fmt.Errorf("%w: WithFastPathShare(%v): the share must be more than 0 and at most 1", ErrBadOption, o.fastShare)
	}
	return nil
}

// WithContainerLimit makes decoding the arguments of method ("Service:name"
// or "name") refuse any list, set or map of more than n elements before
// allocating it; the call gets a PROTOCOL_ERROR exception. For a service
// with a declared batch limit this keeps a request carrying millions of
// elements from costing memory in proportion. Methods without one use
// WithLimits' MaxContainerSize.
func WithContainerLimit(method string, n int) Option {
	return func(o *options) {
		if o.containerLimits == nil {
			o.containerLimits = map[string]int{}
		}
		o.containerLimits[method] = n
	}
}

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRegistry registers the server's metrics in reg instead of a private
// registry. The global default registry is never used implicitly.
func WithRegistry(reg *prometheus.Registry) Option { return func(o *options) { o.registry = reg } }

// WithDebugAddr serves net/http/pprof and /metrics on addr (e.g.
// "127.0.0.1:6060"), a listener separate from the RPC port.
func WithDebugAddr(addr string) Option { return func(o *options) { o.debugAddr = addr } }

// WithTLS makes Serve wrap every listener in TLS with cfg.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithMaxConns bounds concurrent connections; extra ones are closed at
// accept with a log line.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = n } }

// WithMaxConcurrentCalls bounds calls executing at once across all
// connections. When the bound is hit, connections stop being read (TCP
// backpressure) unless WithBusyTimeout is set.
func WithMaxConcurrentCalls(n int) Option { return func(o *options) { o.maxCalls = n } }

// WithBusyTimeout makes a call that waited d for a free slot fail with an
// INTERNAL_ERROR "server busy" exception instead of waiting longer.
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// WithInterceptors appends interceptors; the first given runs outermost.
func WithInterceptors(ic ...Interceptor) Option {
	return func(o *options) { o.interceptors = append(o.interceptors, ic...) }
}

// WithLimits sets the decoder limits (message size, depth, ...) applied to
// every request; MaxMessageSize bounds every reply too. A MaxMessageSize
// below wire.MinMessageSize (4 KiB: the protocol's own frames must fit)
// fails Serve with an error matching ErrBadOption and
// wire.ErrMessageLimit.
func WithLimits(l proto.Limits) Option { return func(o *options) { o.limits = l } }

// checkLimits refuses a message limit the protocol's own frames do not
// fit in (wire.MinMessageSize).
func (o *options) checkLimits() error {
	if err := wire.CheckMessageLimit(o.limits.MaxMessageSize); err != nil {
		return fmt.Errorf("%w: WithLimits: %w", ErrBadOption, err)
	}
	return nil
}

// WithoutUpgrade makes the server answer the HatRPC handshake with no
// capabilities, so every connection stays plain Thrift.
func WithoutUpgrade() Option { return func(o *options) { o.noUpgrade = true } }

// WithWriteTimeout bounds how long a reply write may block on a client that
// stops reading (default 30s); the connection is then closed.
func WithWriteTimeout(d time.Duration) Option { return func(o *options) { o.writeTimeout = d } }

// WithRDMA lets HatRPC clients move calls onto lanes of the HatRPC engine:
// provider "auto" (ibv when an RDMA device exists, else shm; HATRPC_PROVIDER
// overrides), "shm" or "ibv". Shared memory is offered only to clients on
// the same host. Each function then runs over the protocols its hints plan,
// one lane per function per client (docs/design/lanes.md). Off by default
// and with "off", as on the client: every call stays on TCP. Any other name
// fails Serve with an error matching ErrBadProvider.
func WithRDMA(provider string) Option { return func(o *options) { o.rdma = provider } }

// WithRDMADevice fixes the RDMA device (and port) lanes use, spelt
// "mlx5_1" or "mlx5_1:1"; by default (and with HATRPC_RDMA_DEVICE unset)
// each connection's lanes use the device whose netdev carries the local
// address the connection arrived on. A name or port the host lacks fails
// Serve with an error matching fastpath.ErrNoRDMAChoice that lists the
// devices, ports and GIDs there are.
func WithRDMADevice(spec string) Option { return func(o *options) { o.rdmaDevice = spec } }

// WithRDMAGID fixes the GID: "auto" (the default: the address's own GID,
// RoCE v2 before v1), "v2" (RoCE v2 only) or a GID table index.
// HATRPC_RDMA_GID sets it when the option is not given.
func WithRDMAGID(spec string) Option { return func(o *options) { o.rdmaGID = spec } }

// WithDumpable keeps the process dumpable when the server opens the shm
// provider. By default it is made non-dumpable then (prctl
// PR_SET_DUMPABLE 0): /proc/<pid>/fd and /proc/<pid>/mem become root's, so
// another process of the same user cannot open the server's shared
// segments or read its memory past the per-connection isolation. That is
// process-wide: no core dumps, and same-user debuggers, lsof and /proc
// readers are refused too (see docs/observability.md). ibv is unaffected.
func WithDumpable() Option { return func(o *options) { o.dumpable = true } }

// WithServiceLevelHints plans every method from its service's level hints
// only, ignoring function-level groups (for comparisons; the client has the
// same option).
func WithServiceLevelHints() Option { return func(o *options) { o.svcLevel = true } }

// WithOwnedArgs ignores the borrow_args, borrow_msgs and borrow_ctx
// hints: every handler gets arguments, stream messages and a context of
// its own to keep, as without the hints. For a handler suspected of
// keeping a borrowed argument or context (which the server would then
// overwrite or reuse), and for comparisons.
func WithOwnedArgs() Option { return func(o *options) { o.ownedArgs = true } }
