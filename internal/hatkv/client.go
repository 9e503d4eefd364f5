package hatkv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
)

// Client is a set of connections to one HatKV server. Calls are spread
// over the connections round robin; each connection pipelines concurrent
// calls, so Client is safe for concurrent use.
type Client struct {
	conns []*client.Conn
	kvs   []*hatkv.HatKVClient
	next  atomic.Uint64
}

// ClientOption configures Dial.
type ClientOption func(*clientOptions)

type clientOptions struct {
	conns     int
	transport string
	extra     []client.Option
	tls       *tls.Config
	token     string
}

// WithClientTLS speaks TLS to the server (see ClientTLS).
func WithClientTLS(cfg *tls.Config) ClientOption { return func(o *clientOptions) { o.tls = cfg } }

// WithClientToken presents the shared secret the server requires.
func WithClientToken(token string) ClientOption { return func(o *clientOptions) { o.token = token } }

// WithConns opens n connections (default 1).
func WithConns(n int) ClientOption { return func(o *clientOptions) { o.conns = n } }

// WithClientTransport selects the transport: auto (lanes where the server
// grants them, else TCP), tcp, or shm/rdma (Dial fails unless granted).
func WithClientTransport(name string) ClientOption {
	return func(o *clientOptions) { o.transport = name }
}

// WithClientOptions passes options to every client.Conn.
func WithClientOptions(opts ...client.Option) ClientOption {
	return func(o *clientOptions) { o.extra = append(o.extra, opts...) }
}

// Dial connects to the server at addr.
func Dial(ctx context.Context, addr string, opts ...ClientOption) (*Client, error) {
	o := clientOptions{conns: 1, transport: "auto"}
	for _, f := range opts {
		f(&o)
	}
	tr, err := parseTransport(o.transport)
	if err != nil {
		return nil, err
	}
	c := &Client{}
	lanes := fastpath.Provider(tr)
	if lanes == "" {
		lanes = "off"
	}
	copts := append([]client.Option{client.WithHints(&hatkv.HatKVHints), client.WithRDMA(lanes)}, o.extra...)
	if o.tls != nil || o.token != "" {
		// TLS runs in the dialer, below the token, so the token is
		// never sent in clear when TLS is on.
		copts = append(copts, client.WithDialer(authDialer(o.tls, o.token)))
	}
	for i := 0; i < max(o.conns, 1); i++ {
		conn, err := client.Dial(ctx, addr, copts...)
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("hatkv: dial %s: %w", addr, err)
		}
		c.conns = append(c.conns, conn)
		c.kvs = append(c.kvs, hatkv.NewHatKVClient(conn))
	}
	if fastpath.Lanes(tr) {
		if got := c.conns[0].Plan("HatKV:Get").Transport; got != tr {
			cause := c.conns[0].FastPathErr()
			_ = c.Close()
			if cause != nil { // not the server's choice: say what happened
				return nil, fmt.Errorf("%w: no %s lanes from the server at %s: %w", ErrTransportUnavailable, tr, addr, cause)
			}
			return nil, fmt.Errorf("%w: the server at %s did not grant %s lanes (calls would run over %s); %s",
				ErrTransportUnavailable, addr, tr, got, grantAdvice(tr, o.tls != nil))
		}
	}
	return c, nil
}

// grantAdvice says how to get a server to grant lanes of transport tr. A
// server with TLS serves TCP only under --transport auto, refuses rdma
// (its lanes are not encrypted) and grants shm only when asked for it.
func grantAdvice(tr hints.Transport, tlsOn bool) string {
	switch {
	case !tlsOn:
		return fmt.Sprintf("start it with --transport %s or auto on a host that can", tr)
	case tr == hints.TransportSHM:
		return "with TLS a server grants shm lanes only when started with --transport shm (auto serves TCP only), to clients on its host"
	}
	return fmt.Sprintf("a server with TLS never grants %s lanes (they are not encrypted): use --transport tcp, or shm with a server on this host started with --transport shm", tr)
}

// KV returns the generated client of the next connection.
func (c *Client) KV() *hatkv.HatKVClient {
	return c.kvs[(c.next.Add(1)-1)%uint64(len(c.kvs))]
}

// Plan returns the plan table the runtime runs an IDL function by (rows of
// route and engine protocol by size), with the transport as negotiated.
func (c *Client) Plan(method string) hints.Table { return c.conns[0].Plan(method) }

// Close closes every connection.
func (c *Client) Close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// ErrMissing reports keys a YCSB read found absent; YCSB counts such a
// read as failed.
var ErrMissing = errors.New("hatkv: key not found")

// YCSB adapts a Client (one server) or a Cluster (keys spread over
// several) to ycsb.DB: Read/Update/Insert/Scan map to Get/Put/Put/Scan and
// the HatRPC extension MultiRead/MultiUpdate to MultiGet/MultiPut.
type YCSB struct {
	C       *Client
	Cluster *Cluster // used instead of C when set
}

var _ ycsb.DB = YCSB{}

func (y YCSB) kv() KV {
	if y.Cluster != nil {
		return y.Cluster
	}
	return y.C.KV()
}

// Read implements ycsb.DB.
func (y YCSB) Read(ctx context.Context, key string, fields []string) (map[string][]byte, error) {
	rec, err := y.kv().Get(ctx, key, fields)
	return rec, err
}

// Update implements ycsb.DB.
func (y YCSB) Update(ctx context.Context, key string, values map[string][]byte) error {
	return y.kv().Put(ctx, key, values)
}

// Insert implements ycsb.DB; on a new key a merge is an insert.
func (y YCSB) Insert(ctx context.Context, key string, values map[string][]byte) error {
	return y.kv().Put(ctx, key, values)
}

// Scan implements ycsb.DB.
func (y YCSB) Scan(ctx context.Context, startKey string, count int, fields []string) ([]map[string][]byte, error) {
	kvs, err := y.kv().Scan(ctx, startKey, int32(count), fields)
	if err != nil {
		return nil, err
	}
	out := make([]map[string][]byte, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Record
	}
	return out, nil
}

// MultiRead implements ycsb.DB; a missing key fails the whole operation,
// as a missing key fails a YCSB read.
func (y YCSB) MultiRead(ctx context.Context, keys []string, fields []string) ([]map[string][]byte, error) {
	res, err := y.kv().MultiGet(ctx, keys, fields)
	if err != nil {
		return nil, err
	}
	out := make([]map[string][]byte, len(res))
	missing := 0
	for i, l := range res {
		if l == nil || !l.Found {
			missing++
			continue
		}
		out[i] = l.Record
	}
	if missing > 0 {
		return out, fmt.Errorf("%w: %d of %d keys in the batch", ErrMissing, missing, len(keys))
	}
	return out, nil
}

// MultiUpdate implements ycsb.DB.
func (y YCSB) MultiUpdate(ctx context.Context, keys []string, values []map[string][]byte) error {
	if len(keys) != len(values) {
		return fmt.Errorf("hatkv: multi-update of %d keys with %d records", len(keys), len(values))
	}
	recs := make([]*hatkv.KeyRecord, len(keys))
	for i, k := range keys {
		recs[i] = &hatkv.KeyRecord{Key: k, Record: values[i]}
	}
	return y.kv().MultiPut(ctx, recs)
}
