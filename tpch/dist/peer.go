package dist

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/tpch/gen/exchange"
	"github.com/hatrpc/hatrpc/tpch/gen/exchange/exchangeserver"
)

// Config is one of the paper's three configurations of the exchange hop.
type Config int

const (
	// Vanilla is Apache Thrift Go's generated code over TSocket, both sides.
	Vanilla Config = iota
	// Service is HatRPC planned from exchange.thrift's service-level hints.
	Service
	// Function is HatRPC planned from each function's own hints.
	Function
)

var configNames = [...]string{"vanilla", "service", "function"}

func (c Config) String() string {
	if int(c) < len(configNames) && c >= 0 {
		return configNames[c]
	}
	return fmt.Sprintf("Config(%d)", int(c))
}

// ParseConfig reads "vanilla", "service" or "function".
func ParseConfig(s string) (Config, error) {
	for i, n := range configNames {
		if strings.EqualFold(s, n) {
			return Config(i), nil
		}
	}
	return 0, fmt.Errorf("dist: unknown configuration %q: want vanilla, service or function", s)
}

// exchanger is the exchange service as the coordinator calls it (hatgen's
// handler interface: HatRPC's client has it, Apache's is adapted).
type exchanger = exchange.ExchangeHandler

// peer is the coordinator's client of one worker.
type peer interface {
	// session returns a client for one query's calls and its release;
	// ctx bounds the dial, not the session. fresh: it was dialled now
	// (not a connection kept from earlier calls).
	session(ctx context.Context) (ex exchanger, release func(), fresh bool, err error)
	// close drops the connection (after a failure of the exchange
	// itself, so that the next session dials again: a restarted worker).
	close() error
}

// hatPeer is a HatRPC client of one worker: one connection, calls
// multiplexed on it, dialled again after it failed.
type hatPeer struct {
	addr string
	opts []client.Option

	mu   sync.Mutex
	conn *client.Conn
}

func (p *hatPeer) session(ctx context.Context) (exchanger, func(), bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fresh := p.conn == nil
	if fresh {
		c, err := client.Dial(ctx, p.addr, p.opts...)
		if err != nil {
			return nil, nil, false, err
		}
		p.conn = c
	}
	return exchange.NewExchangeClient(p.conn), func() {}, fresh, nil
}

// reset closes the connection; the next session dials again.
func (p *hatPeer) reset() {
	p.mu.Lock()
	c := p.conn
	p.conn = nil
	p.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

func (p *hatPeer) close() error {
	p.reset()
	return nil
}

// lanes reports the connection's lane statistics (nil when it has none).
func (p *hatPeer) lanes() []client.LaneStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		return nil
	}
	return p.conn.LaneStats()
}

// ServerOptions are the HatRPC server options configuration c needs.
func (c Config) ServerOptions() []server.Option {
	if c == Service {
		return []server.Option{server.WithServiceLevelHints()}
	}
	return nil
}

// ClientOptions are the HatRPC client options configuration c needs.
func (c Config) ClientOptions() []client.Option {
	if c == Service {
		return []client.Option{client.WithServiceLevelHints()}
	}
	return nil
}

// RegisterHatRPC binds w to srv as the hinted exchange service.
func RegisterHatRPC(srv *server.Server, w *Worker) {
	exchangeserver.RegisterExchange(srv, w)
}

var _ exchanger = (*Worker)(nil)
