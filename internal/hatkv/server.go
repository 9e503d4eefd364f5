package hatkv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/fb303"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// CheckTransport validates a --transport value: auto (lanes of the
// HatRPC engine where both sides can, else TCP), tcp, shm or rdma.
func CheckTransport(name string) error {
	_, err := parseTransport(name)
	return err
}

func parseTransport(name string) (hints.Transport, error) {
	t, err := hints.ParseTransport(strings.ToLower(name))
	if err != nil {
		return 0, fmt.Errorf("%w: transport %q: want auto, tcp, shm or rdma", ErrConfig, name)
	}
	return t, nil
}

// Option configures a Server.
type Option func(*options)

type options struct {
	logger    *slog.Logger
	debugAddr string
	transport string
	registry  *prometheus.Registry
	overrides [][2]string
	limits    kvstore.Limits
	svcLevel  bool
	rpcOpts   []server.Option
	verify    kvstore.VerifyLevel
	tls       *tls.Config
	token     string
	rdmaDev   string // --rdma-device; "" HATRPC_RDMA_DEVICE, else by address
	rdmaGID   string // --rdma-gid
}

// WithRDMAChoice fixes the RDMA device[:port] and GID (auto, v2 or an
// index) of the lanes, in server.WithRDMADevice's spelling; a device or
// GID the host lacks refuses to start with the list of what exists.
func WithRDMAChoice(device, gid string) Option {
	return func(o *options) { o.rdmaDev, o.rdmaGID = device, gid }
}

// WithRPCOptions passes options (time limits, memory budget, ...) to the
// RPC server, after hatkv's own.
func WithRPCOptions(opts ...server.Option) Option {
	return func(o *options) { o.rpcOpts = append(o.rpcOpts, opts...) }
}

// WithServiceLevelHints plans the RPC functions from hatkv.thrift's
// service-level hints only (the evaluation's "service-level hints"
// configuration); the default uses the per-function hints too.
func WithServiceLevelHints() Option { return func(o *options) { o.svcLevel = true } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithDebugAddr serves /metrics and /debug/pprof on addr.
func WithDebugAddr(addr string) Option { return func(o *options) { o.debugAddr = addr } }

// WithTransport selects the transport (auto or tcp; rdma and shm are
// refused with ErrTransportUnavailable).
func WithTransport(name string) Option { return func(o *options) { o.transport = name } }

// WithRegistry registers the RPC metrics in reg.
func WithRegistry(reg *prometheus.Registry) Option { return func(o *options) { o.registry = reg } }

// WithSetting overrides one storage setting the IDL hints chose, by its
// hint name without "kv." (sync, commit, writemap, mapsize, group_batch,
// group_delay, concurrency).
func WithSetting(key, value string) Option {
	return func(o *options) { o.overrides = append(o.overrides, [2]string{key, value}) }
}

// WithVerify sets how much of data.mdb is checked before LMDB maps it
// (default kvstore.VerifyFull: every page and record).
func WithVerify(v kvstore.VerifyLevel) Option { return func(o *options) { o.verify = v } }

// WithTLS serves TLS only (see ServerTLS).
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithToken requires every connection to present this shared secret
// before any Thrift byte (see AuthListener); "" (the default) requires
// nothing, so plain Thrift clients work.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithLimits overrides kvstore's request limits (zero fields keep defaults).
func WithLimits(l kvstore.Limits) Option { return func(o *options) { o.limits = l } }

// Server is a HatKV server: a kvstore on LMDB behind the generated HatKV
// service.
type Server struct {
	cfg       Config
	store     *kvstore.Store
	rpc       *server.Server
	dev       *fastpath.Device // held for an explicit shm/rdma transport
	transport hints.Transport
	tls       *tls.Config
	token     string
	log       *slog.Logger
	refused   *prometheus.CounterVec
}

// Transport describes what the server offers: "tcp", or "tcp + shm
// lanes" / "tcp + rdma lanes" for HatRPC clients that can use them.
func (s *Server) Transport() string {
	if s.dev == nil {
		return "tcp"
	}
	return "tcp + " + s.dev.Transport().String() + " lanes"
}

// Open opens (or creates) the store in dir, configured from the IDL hints
// and the overrides, and prepares the RPC server. A directory that holds
// something other than a HatKV store is refused with kvstore's *OpenError.
func Open(ctx context.Context, dir string, opts ...Option) (_ *Server, err error) {
	o := options{logger: slog.Default(), transport: "auto"}
	for _, f := range opts {
		f(&o)
	}
	tr, err := parseTransport(o.transport)
	if err != nil {
		return nil, err
	}
	if o.tls != nil {
		// TLS protects the TCP connections only; RDMA lanes would carry
		// the calls over the network in clear. Shared-memory lanes never
		// leave the host, so an explicit shm stays allowed.
		switch tr {
		case hints.TransportRDMA:
			return nil, fmt.Errorf("%w: --transport rdma with TLS: RDMA lanes are not encrypted; use tcp (or shm for same-host clients)", ErrConfig)
		case hints.TransportAuto:
			o.logger.Info("hatkv: TLS on: serving TCP only (RDMA lanes would not be encrypted; --transport shm adds same-host lanes)")
			tr = hints.TransportTCP
		}
	}
	var dev *fastpath.Device
	if p := fastpath.Provider(tr); p != "" {
		// The reference keeps the device open for the server's lanes. An
		// explicit shm or rdma must work: refuse to start rather than
		// quietly serve TCP; auto without a device serves TCP only.
		sp, perr := fastpath.RDMASpecFromEnv(o.rdmaDev, o.rdmaGID)
		if perr != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, perr)
		}
		if dev, err = fastpath.AcquireFor(ctx, p, fastpath.Target{Spec: sp}); err != nil {
			if sp != (fastpath.RDMASpec{}) {
				return nil, fmt.Errorf("%w: %s: %v", ErrTransportUnavailable, tr, err)
			}
			if tr != hints.TransportAuto {
				return nil, fmt.Errorf("%w: %s: %v", ErrTransportUnavailable, tr, err)
			}
			o.logger.Warn("hatkv: no rdma/shm device; serving TCP only", "err", err)
			tr, dev, err = hints.TransportTCP, nil, nil
		}
	}
	defer func() {
		if dev != nil && err != nil {
			dev.Release()
		}
	}()
	cfg, err := ConfigFromHints(&hatkv.HatKVHints)
	if err != nil {
		return nil, err
	}
	for _, kv := range o.overrides {
		if err := cfg.Set(kv[0], kv[1], "flag"); err != nil {
			return nil, err
		}
	}
	cfg.Limits = o.limits
	st, err := kvstore.Open(ctx, dir, append(cfg.Options(), kvstore.WithVerify(o.verify), kvstore.WithLogger(o.logger))...)
	if err != nil {
		return nil, err
	}
	if m := st.Migrated(); m.From != 0 {
		o.logger.Info("hatkv: migrated the store to the current format (records now kept in wire form)",
			"dir", dir, "from_format", m.From, "to_format", kvstore.FormatVersion, "records", m.Records)
	}
	var sopts []server.Option
	sopts = append(sopts, server.WithLogger(o.logger))
	if p := fastpath.Provider(tr); p != "" {
		sopts = append(sopts, server.WithRDMA(p), server.WithRDMADevice(o.rdmaDev), server.WithRDMAGID(o.rdmaGID))
	}
	if o.svcLevel {
		sopts = append(sopts, server.WithServiceLevelHints())
	}
	if o.debugAddr != "" {
		sopts = append(sopts, server.WithDebugAddr(o.debugAddr))
	}
	if o.registry != nil {
		sopts = append(sopts, server.WithRegistry(o.registry))
	}
	// A request's lists and maps (keys of a batch, fields of a record) are
	// refused while decoding beyond a few times the store's limits, before
	// they are allocated: three MultiGets of 16M keys each took 1.3 GB
	// when the batch limit was checked only after decoding (issue 18).
	// Counts up to that bound still get the store's typed InvalidArgument.
	maxItems := decodeItems(o.limits)
	for _, f := range hatkv.HatKVHints.Functions {
		sopts = append(sopts, server.WithContainerLimit("HatKV:"+f.Name, maxItems))
	}
	rpc := server.New(append(sopts, o.rpcOpts...)...)
	if err := rpc.Registry().Register(newStoreCollector(st.Stats)); err != nil {
		_ = rpc.Close()
		_ = st.Close()
		return nil, fmt.Errorf("hatkv: registering store metrics: %w", err)
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hatkv_connections_refused_total",
		Help: "Connections refused before any call: failed TLS handshake, wrong or missing token, too many handshakes in progress.",
	}, []string{"reason"})
	if err := rpc.Registry().Register(refused); err != nil {
		_ = rpc.Close()
		_ = st.Close()
		return nil, fmt.Errorf("hatkv: registering auth metrics: %w", err)
	}
	Register(rpc, NewService(st))
	// fb303 status (getStatus, aliveSince, getCounters from the metrics
	// above) for Thrift tooling and load balancers; its shutdown call is
	// ignored, as hatkv's callers need no more than the token to reach it.
	fb303.Register(rpc, fb303.WithName("hatkv"), fb303.WithLogger(o.logger),
		fb303.WithOptions(map[string]string{"transport": tr.String()}))
	return &Server{cfg: cfg, store: st, rpc: rpc, dev: dev, transport: tr, tls: o.tls, token: o.token, log: o.logger, refused: refused}, nil
}

// Config returns the storage configuration in effect.
func (s *Server) Config() Config { return s.cfg }

// StartDebug starts the metrics and pprof listener, if configured, and
// returns its address.
func (s *Server) StartDebug() (net.Addr, error) { return s.rpc.StartDebug() }

// Serve serves ln until Shutdown; it returns nil after a shutdown. With
// TLS or a token, connections pass AuthListener first.
func (s *Server) Serve(ln net.Listener) error {
	if s.tls != nil || s.token != "" {
		ln = NewAuthListener(ln, s.tls, s.token, s.log, func(kind string) { s.refused.WithLabelValues(kind).Inc() })
	}
	err := s.rpc.Serve(ln)
	if errors.Is(err, server.ErrServerClosed) {
		return nil
	}
	return err
}

// Backup writes a verified, compacted copy of the store into dir (see
// kvstore.Store.Backup) while the server keeps serving.
func (s *Server) Backup(ctx context.Context, dir string) (*lmdb.Report, error) {
	return s.store.Backup(ctx, dir)
}

// Shutdown lets in-flight calls finish (or cancels them when ctx ends),
// then closes the store so every acknowledged write is committed and the
// environment is closed cleanly.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.rpc.Shutdown(ctx)
	err = errors.Join(err, s.store.Close())
	if s.dev != nil {
		s.dev.Release()
	}
	return err
}

// decodeItems is the element count beyond which a request's containers
// are refused at decode: four times the larger of the batch and field
// limits in effect.
func decodeItems(l kvstore.Limits) int {
	batch, fields := kvstore.DefaultLimits.MaxBatch, kvstore.DefaultLimits.MaxFields
	if l.MaxBatch > 0 {
		batch = l.MaxBatch
	}
	if l.MaxFields > 0 {
		fields = l.MaxFields
	}
	return 4 * max(batch, fields)
}
