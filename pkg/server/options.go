package server

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/pkg/proto"
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
	svcLevel     bool
	ownedArgs    bool
	laneLimits   LaneLimits
}

func defaultOptions() options {
	return options{
		logger:   slog.Default(),
		maxConns: 10000,
		maxCalls: 4096,
		limits:   proto.DefaultLimits,

		writeTimeout: 30 * time.Second,
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
// every request.
func WithLimits(l proto.Limits) Option { return func(o *options) { o.limits = l } }

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
// one lane per function per client (docs/design/lanes.md). Off by default:
// without it every call stays on TCP.
func WithRDMA(provider string) Option { return func(o *options) { o.rdma = provider } }

// WithServiceLevelHints plans every method from its service's level hints
// only, ignoring function-level groups (for comparisons; the client has the
// same option).
func WithServiceLevelHints() Option { return func(o *options) { o.svcLevel = true } }

// WithOwnedArgs ignores the borrow_args hint: every handler gets arguments
// of its own to keep, as without the hint. For a handler suspected of
// keeping a borrowed argument (which the server would then overwrite),
// and for comparisons.
func WithOwnedArgs() Option { return func(o *options) { o.ownedArgs = true } }
