package client

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Option configures a Conn.
type Option func(*options)

type options struct {
	proto            proto.Protocol
	framed           bool
	tls              *tls.Config
	dialTimeout      time.Duration
	handshakeTimeout time.Duration
	callTimeout      time.Duration
	interceptors     []Interceptor
	multiplexed      bool
	noUpgrade        bool
	limits           proto.Limits
	hints            []*hints.Service
	dial             func(ctx context.Context, addr string) (net.Conn, error)
	writeTimeout     time.Duration
}

func defaultOptions() options {
	return options{
		proto:            proto.Binary,
		dialTimeout:      10 * time.Second,
		handshakeTimeout: 5 * time.Second,
		limits:           proto.DefaultLimits,
		writeTimeout:     30 * time.Second,
	}
}

// WithFramed uses Thrift's framed transport (4-byte length prefix) for plain
// Thrift; the default is unframed, Apache's default.
func WithFramed() Option { return func(o *options) { o.framed = true } }

// WithUnframed uses the unframed (buffered) transport; this is the default.
func WithUnframed() Option { return func(o *options) { o.framed = false } }

// WithProtocol selects proto.Binary (default) or proto.Compact.
func WithProtocol(p proto.Protocol) Option { return func(o *options) { o.proto = p } }

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

// WithoutUpgrade skips the capability handshake: the connection stays plain
// Thrift even against a HatRPC server.
func WithoutUpgrade() Option { return func(o *options) { o.noUpgrade = true } }

// WithLimits sets decoder limits for replies.
func WithLimits(l proto.Limits) Option { return func(o *options) { o.limits = l } }

// WithHints registers generated hint tables so Plan can answer for methods
// that have not been called yet.
func WithHints(svcs ...*hints.Service) Option {
	return func(o *options) { o.hints = append(o.hints, svcs...) }
}

// WithDialer replaces the TCP dialer (the TLS wrapping still applies).
func WithDialer(d func(ctx context.Context, addr string) (net.Conn, error)) Option {
	return func(o *options) { o.dial = d }
}

// WithWriteTimeout bounds how long a request write may block on a server
// that stops reading (default 30s); the connection then fails with
// ErrConnClosed and later calls reconnect.
func WithWriteTimeout(d time.Duration) Option { return func(o *options) { o.writeTimeout = d } }
