package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"

	"github.com/hatrpc/hatrpc/pkg/server"
)

// Registrar announces a server's addresses under a service's prefix, each
// key attached to a lease it keeps alive: a server that dies without
// deregistering disappears when the lease expires (WithTTL). A lease
// that is lost (etcd restarted from an older state, or unreachable for
// longer than the TTL) is granted again and the keys written again, as
// often as it takes, until Deregister. Pass it to server.WithRegistrar;
// one Registrar serves one server (Deregister withdraws all it wrote).
type Registrar struct {
	cli     *clientv3.Client
	em      endpoints.Manager // writes entries in the naming/endpoints format
	service string
	o       options
	ttlSec  int64

	mu    sync.Mutex
	addrs []string // registered, in Register's order
	k     *keeper  // nil when none runs
}

// keeper is the goroutine that keeps a Registrar's keys in etcd, from the
// first Register to Deregister.
type keeper struct {
	stop  context.CancelFunc
	done  chan struct{}    // closed when it has returned
	kick  chan struct{}    // an address was added: write the keys again
	lease clientv3.LeaseID // the lease holding the keys (0: none); its own until done
}

var _ server.Registrar = (*Registrar)(nil)

// NewRegistrar returns a Registrar of servers of service (keys
// "service/addr"). Options: WithTTL, WithMetadata, WithAdvertise,
// WithLogger.
func NewRegistrar(cli *clientv3.Client, service string, opts ...Option) (*Registrar, error) {
	if err := checkArgs("NewRegistrar", cli, service); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	if o.ttl < time.Second {
		return nil, fmt.Errorf("etcd: NewRegistrar: TTL %s is under 1s", o.ttl)
	}
	if _, err := json.Marshal(o.metadata); err != nil {
		return nil, fmt.Errorf("etcd: NewRegistrar: metadata: %w", err)
	}
	if o.advertise != "" {
		if err := checkAddr(o.advertise); err != nil {
			return nil, fmt.Errorf("etcd: NewRegistrar: advertised address: %w", err)
		}
	}
	em, err := endpoints.NewManager(cli, service)
	if err != nil {
		return nil, fmt.Errorf("etcd: NewRegistrar: %w", err)
	}
	return &Registrar{
		cli: cli, em: em, service: service, o: o,
		ttlSec: int64((o.ttl + time.Second - 1) / time.Second),
	}, nil
}

// Register announces addr (the WithAdvertise address instead, when
// given) and returns without waiting for etcd: the lease is granted and
// the key written in the background, and again whenever the lease is
// lost, so an etcd outage never keeps a server from serving. It fails
// only for an address no client can dial, such as ":9090" without
// WithAdvertise.
func (r *Registrar) Register(ctx context.Context, addr string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.o.advertise != "" {
		addr = r.o.advertise
	}
	if err := checkAddr(addr); err != nil {
		return fmt.Errorf("etcd: register %s: %w; WithAdvertise gives the address clients dial", r.service, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.addrs, addr) {
		return nil
	}
	r.addrs = append(r.addrs, addr)
	if r.k != nil {
		select {
		case r.k.kick <- struct{}{}:
		default: // a write is pending already
		}
		return nil
	}
	kctx, stop := context.WithCancel(context.Background())
	r.k = &keeper{stop: stop, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	go r.keep(kctx, r.k)
	return nil
}

// Deregister stops the keep-alive and revokes the lease, which deletes
// every key Register wrote. It waits for etcd at most a TTL (after that
// long the lease has expired anyway), and not at all when the lease was
// already given up because etcd stopped answering.
func (r *Registrar) Deregister(ctx context.Context) error {
	r.mu.Lock()
	k := r.k
	r.k, r.addrs = nil, nil
	if k != nil {
		k.stop() // before a Register can add an address it might write
	}
	r.mu.Unlock()
	if k == nil {
		return nil
	}
	<-k.done
	id := k.lease
	if id == 0 {
		return nil // between leases: the keys went with the last one
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.ttl)
	defer cancel()
	if _, err := r.cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcd: deregister %s (its keys go when lease %x expires, within %s): %w", r.service, int64(id), r.o.ttl, err)
	}
	r.o.log.Info("etcd: deregistered", "service", r.service)
	return nil
}

// keep registers the addresses under a lease and keeps it alive, starting
// over with a new lease whenever one is lost, until ctx ends.
func (r *Registrar) keep(ctx context.Context, k *keeper) {
	defer close(k.done)
	// A lost lease has taken the keys with it: come back well within a
	// TTL once etcd answers.
	rt := newRetry(r.o.log, r.o.ttl/2)
	for {
		err := r.session(ctx, k, func() { rt.ok() })
		if ctx.Err() != nil {
			return
		}
		if !rt.failed(ctx, "etcd: not registered; trying again", "etcd: still not registered",
			"service", r.service, "err", err) {
			return
		}
	}
}

var errLeaseLost = errors.New("lease expired or revoked")

// session is one lease: granted, the keys written under it, kept alive
// until it is lost (an error) or ctx ends. registered runs once the keys
// are in etcd.
func (r *Registrar) session(ctx context.Context, k *keeper, registered func()) error {
	// No etcd call may take longer than a TTL: by then a lease it
	// renews or writes under may be gone.
	gctx, cancel := context.WithTimeout(ctx, r.o.ttl)
	g, err := r.cli.Grant(gctx, r.ttlSec)
	cancel()
	if err != nil {
		return fmt.Errorf("grant a lease: %w", err)
	}
	// Known before any key is written under it, so that a Deregister
	// ending ctx midway still revokes whatever was written.
	k.lease = g.ID
	kctx, stopKeepAlive := context.WithCancel(ctx)
	defer stopKeepAlive()
	alive, err := r.cli.KeepAlive(kctx, g.ID)
	if err == nil {
		var addrs []string
		if addrs, err = r.put(ctx, g.ID); err == nil {
			registered()
			r.o.log.Info("etcd: registered", "service", r.service, "addrs", addrs,
				"lease", fmt.Sprintf("%x", int64(g.ID)), "ttl", r.o.ttl)
			err = r.keepAlive(ctx, k, alive)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err() // the lease stays for Deregister to revoke
	}
	// Abandoned: its keys go when it expires, and the next lease writes
	// them all again.
	k.lease = 0
	return fmt.Errorf("lease %x: %w", int64(g.ID), err)
}

// keepAlive drains the lease's keep-alive answers and writes addresses
// Register adds, until the lease is lost or a write fails.
func (r *Registrar) keepAlive(ctx context.Context, k *keeper, alive <-chan *clientv3.LeaseKeepAliveResponse) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-alive:
			if !ok {
				return errLeaseLost
			}
		case <-k.kick:
			if _, err := r.put(ctx, k.lease); err != nil {
				return err
			}
		}
	}
}

// put writes every registered address under lease id, in one transaction.
func (r *Registrar) put(ctx context.Context, id clientv3.LeaseID) ([]string, error) {
	r.mu.Lock()
	addrs := slices.Clone(r.addrs)
	r.mu.Unlock()
	ups := make([]*endpoints.UpdateWithOpts, len(addrs))
	for i, a := range addrs {
		ups[i] = endpoints.NewAddUpdateOpts(r.service+"/"+a,
			endpoints.Endpoint{Addr: a, Metadata: r.o.metadata}, clientv3.WithLease(id))
	}
	pctx, cancel := context.WithTimeout(ctx, r.o.ttl)
	defer cancel()
	if err := r.em.Update(pctx, ups); err != nil {
		return nil, fmt.Errorf("write %v under lease %x: %w", addrs, int64(id), err)
	}
	return addrs, nil
}
