package emul

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Pool spreads concurrent operations over clients, one operation per
// client at a time (an endpoint carries one exchange at a time): YCSB with
// n threads runs over a Pool of n clients, one connection per thread.
type Pool struct {
	clients []*Client
	free    chan *Client
	once    sync.Once
	done    chan struct{}
}

var _ ycsb.DB = (*Pool)(nil)

// NewPool makes a Pool of clients; it owns them.
func NewPool(clients ...*Client) *Pool {
	p := &Pool{clients: clients, free: make(chan *Client, len(clients)), done: make(chan struct{})}
	for _, c := range clients {
		p.free <- c
	}
	return p
}

// DialPool opens n connections with dial and Dial.
func DialPool(ctx context.Context, dev *rdma.Device, n int, dial func(context.Context) (net.Conn, error), kind Kind, opts ...ClientOption) (*Pool, error) {
	var cs []*Client
	for range max(n, 1) {
		nc, err := dial(ctx)
		if err == nil {
			var c *Client
			if c, err = Dial(ctx, dev, nc, kind, opts...); err == nil {
				cs = append(cs, c)
				continue
			}
		}
		for _, c := range cs {
			_ = c.Close()
		}
		return nil, fmt.Errorf("emul: connection %d of %d: %w", len(cs)+1, n, err)
	}
	return NewPool(cs...), nil
}

// Clients are the pool's connections.
func (p *Pool) Clients() []*Client { return p.clients }

func (p *Pool) get(ctx context.Context) (*Client, error) {
	select {
	case c := <-p.free:
		return c, nil
	case <-p.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *Pool) put(c *Client) { p.free <- c }

// Close closes every client.
func (p *Pool) Close() error {
	var errs []error
	p.once.Do(func() {
		close(p.done)
		for _, c := range p.clients {
			errs = append(errs, c.Close())
		}
	})
	return errors.Join(errs...)
}

// Read implements ycsb.DB.
func (p *Pool) Read(ctx context.Context, key string, fields []string) (map[string][]byte, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	defer p.put(c)
	return c.Read(ctx, key, fields)
}

// Update implements ycsb.DB.
func (p *Pool) Update(ctx context.Context, key string, values map[string][]byte) error {
	c, err := p.get(ctx)
	if err != nil {
		return err
	}
	defer p.put(c)
	return c.Update(ctx, key, values)
}

// Insert implements ycsb.DB.
func (p *Pool) Insert(ctx context.Context, key string, values map[string][]byte) error {
	c, err := p.get(ctx)
	if err != nil {
		return err
	}
	defer p.put(c)
	return c.Insert(ctx, key, values)
}

// Scan implements ycsb.DB.
func (p *Pool) Scan(ctx context.Context, startKey string, count int, fields []string) ([]map[string][]byte, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	defer p.put(c)
	return c.Scan(ctx, startKey, count, fields)
}

// MultiRead implements ycsb.DB.
func (p *Pool) MultiRead(ctx context.Context, keys []string, fields []string) ([]map[string][]byte, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	defer p.put(c)
	return c.MultiRead(ctx, keys, fields)
}

// MultiUpdate implements ycsb.DB.
func (p *Pool) MultiUpdate(ctx context.Context, keys []string, values []map[string][]byte) error {
	c, err := p.get(ctx)
	if err != nil {
		return err
	}
	defer p.put(c)
	return c.MultiUpdate(ctx, keys, values)
}
