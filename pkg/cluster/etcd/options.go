package etcd

import (
	"log/slog"
	"time"
)

// Option configures a Resolver or a Registrar; each says which it is for.
type Option func(*options)

type options struct {
	log       *slog.Logger
	ttl       time.Duration
	metadata  any
	advertise string
}

// DefaultTTL is a registration's lease TTL: a server that dies without
// deregistering is gone from its clients' lists about this long later.
const DefaultTTL = 10 * time.Second

func newOptions(opts []Option) options {
	o := options{log: slog.Default(), ttl: DefaultTTL}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithLogger logs through l instead of slog.Default() (both).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithTTL sets the registration's lease TTL, in whole seconds, at least
// 1 s; etcd raises a TTL under its minimum (1.5 × its election timeout,
// 1.5 s by default) to that minimum (Registrar).
func WithTTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// WithMetadata stores md (anything encoding/json marshals, such as
// map[string]any{"weight": 10, "transport": "shm"}) as the entry's
// Metadata, for tools and other readers; the Resolver reads only the
// address (Registrar).
func WithMetadata(md any) Option { return func(o *options) { o.metadata = md } }

// WithAdvertise registers addr instead of the listener's address: the
// address clients dial when the server listens on all interfaces
// (":9090") or behind a NAT (Registrar).
func WithAdvertise(addr string) Option { return func(o *options) { o.advertise = addr } }
