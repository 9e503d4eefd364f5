package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hatrpc/hatrpc/pkg/cluster"
)

// Resolver names the servers registered under a service's prefix. As a
// cluster.Watcher it watches the prefix and pushes each change to the
// cluster.Client as etcd reports it; while etcd is unreachable it pushes
// nothing, so the Client keeps calling the servers it knows.
type Resolver struct {
	cli    *clientv3.Client
	prefix string
	o      options
	bad    badKeys
}

var _ cluster.Watcher = (*Resolver)(nil)

// NewResolver returns a Resolver of the servers registered as service
// (keys "service/addr"). Options: WithLogger.
func NewResolver(cli *clientv3.Client, service string, opts ...Option) (*Resolver, error) {
	if err := checkArgs("NewResolver", cli, service); err != nil {
		return nil, err
	}
	r := &Resolver{cli: cli, prefix: service + "/", o: newOptions(opts)}
	r.bad.log = r.o.log
	return r, nil
}

// Resolve lists the servers registered now.
func (r *Resolver) Resolve(ctx context.Context) ([]string, error) {
	eps, _, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	addrs := eps.addrs()
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: nothing registered under %q in etcd", cluster.ErrNoAddresses, r.prefix)
	}
	return addrs, nil
}

// keyAddrs maps a key to the address its entry names.
type keyAddrs map[string]string

func (e keyAddrs) addrs() []string {
	out := make([]string, 0, len(e))
	for _, a := range e {
		out = append(out, a)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// list reads every entry under the prefix and the revision it read at.
// Serializable: a member cut off from its cluster still answers with
// what it has, which beats no list at all.
func (r *Resolver) list(ctx context.Context) (keyAddrs, int64, error) {
	resp, err := r.cli.Get(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithSerializable())
	if err != nil {
		return nil, 0, fmt.Errorf("etcd: list %q: %w", r.prefix, err)
	}
	eps := keyAddrs{}
	var bad map[string]struct{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		addr, err := decodeEntry(kv.Value)
		if err != nil {
			r.bad.skip(key, err)
			if bad == nil {
				bad = map[string]struct{}{}
			}
			bad[key] = struct{}{}
			continue
		}
		eps[key] = addr
	}
	r.bad.keepOnly(bad)
	return eps, resp.Header.Revision, nil
}

var errWatchClosed = errors.New("etcd: watch channel closed")

// Watch lists the prefix, pushes the list, then follows etcd's watch from
// the listed revision, pushing the list after every change. A watch that
// fails (compaction, a member lost) is listed and followed again after a
// backoff pause; an unreachable etcd is waited for, with nothing pushed.
// It returns when ctx ends, or when the etcd client is closed.
func (r *Resolver) Watch(ctx context.Context, update func(addrs []string)) error {
	var last []string
	pushed := false
	push := func(eps keyAddrs) {
		addrs := eps.addrs()
		if pushed && slices.Equal(addrs, last) {
			return
		}
		pushed, last = true, addrs
		update(addrs)
	}
	rt := newRetry(r.o.log, 5*time.Second)
	for {
		eps, rev, err := r.list(ctx)
		if err == nil {
			if rt.ok() {
				r.o.log.Info("etcd: watching again", "prefix", r.prefix, "servers", len(eps))
			}
			push(eps)
			err = r.follow(ctx, eps, rev+1, push)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.cli.Ctx().Err() != nil {
			return fmt.Errorf("etcd: watch %q: the etcd client is closed", r.prefix)
		}
		if !rt.failed(ctx, "etcd: watch interrupted; keeping the servers known", "etcd: watch still interrupted",
			"prefix", r.prefix, "err", err) {
			return ctx.Err()
		}
	}
}

// follow applies the events of a watch from rev to eps until the watch
// fails or ctx ends.
func (r *Resolver) follow(ctx context.Context, eps keyAddrs, rev int64, push func(keyAddrs)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // releases the watch stream
	for resp := range r.cli.Watch(wctx, r.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("etcd: watch %q: %w", r.prefix, err)
		}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			if ev.Type == clientv3.EventTypeDelete {
				r.bad.forget(key)
				delete(eps, key)
				continue
			}
			addr, err := decodeEntry(ev.Kv.Value)
			if err != nil {
				// An entry rewritten as garbage no longer names its server.
				r.bad.skip(key, err)
				delete(eps, key)
				continue
			}
			r.bad.forget(key)
			eps[key] = addr
		}
		push(eps)
	}
	return errWatchClosed
}
