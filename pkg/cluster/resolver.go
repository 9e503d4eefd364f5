package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Resolver names the servers of a service: host:port addresses, asked
// again every refresh interval (WithRefresh). Resolvers follow Kitex's
// split (discovery apart from balancing). Polling is all a static list or
// DNS can offer; a registry that pushes changes implements Watcher too
// (pkg/cluster/etcd).
type Resolver interface {
	Resolve(ctx context.Context) ([]string, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context) ([]string, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(ctx context.Context) ([]string, error) { return f(ctx) }

// ErrNoAddresses is returned (wrapped) by a resolver that found nothing.
var ErrNoAddresses = errors.New("cluster: resolver found no addresses")

// Static resolves to addrs, always.
func Static(addrs ...string) Resolver {
	list := normalize(addrs)
	return ResolverFunc(func(context.Context) ([]string, error) {
		if len(list) == 0 {
			return nil, fmt.Errorf("%w: empty static list", ErrNoAddresses)
		}
		return slices.Clone(list), nil
	})
}

// Lookup is the part of *net.Resolver the DNS resolvers use; tests pass a
// fake one.
type Lookup interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// DNSOption configures DNS and SRV.
type DNSOption func(*dnsOptions)

type dnsOptions struct{ lookup Lookup }

// WithLookup replaces net.DefaultResolver.
func WithLookup(l Lookup) DNSOption { return func(o *dnsOptions) { o.lookup = l } }

func dnsOpts(opts []DNSOption) dnsOptions {
	o := dnsOptions{lookup: net.DefaultResolver}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// DNS resolves host's A and AAAA records, each address with port.
func DNS(host string, port int, opts ...DNSOption) Resolver {
	o := dnsOpts(opts)
	p := strconv.Itoa(port)
	return ResolverFunc(func(ctx context.Context) ([]string, error) {
		ips, err := o.lookup.LookupHost(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("cluster: resolve %s: %w", host, err)
		}
		addrs := make([]string, 0, len(ips))
		for _, ip := range ips {
			addrs = append(addrs, net.JoinHostPort(ip, p))
		}
		if addrs = normalize(addrs); len(addrs) == 0 {
			return nil, fmt.Errorf("%w: %s has no A/AAAA records", ErrNoAddresses, host)
		}
		return addrs, nil
	})
}

// SRV resolves the SRV records _service._proto.name (RFC 2782) and keeps
// the targets of the lowest priority, each target's addresses with the
// record's port. Weights are not used: the Balancer spreads calls by its
// own measure. An empty service and proto look name up directly.
func SRV(service, proto, name string, opts ...DNSOption) Resolver {
	o := dnsOpts(opts)
	return ResolverFunc(func(ctx context.Context) ([]string, error) {
		cname, recs, err := o.lookup.LookupSRV(ctx, service, proto, name)
		if err != nil {
			return nil, fmt.Errorf("cluster: resolve SRV %s: %w", srvName(service, proto, name), err)
		}
		if len(recs) == 0 {
			return nil, fmt.Errorf("%w: no SRV records for %s", ErrNoAddresses, srvName(service, proto, name))
		}
		best := recs[0].Priority
		for _, r := range recs {
			best = min(best, r.Priority)
		}
		var addrs []string
		var errs []error
		for _, r := range recs {
			if r.Priority != best {
				continue
			}
			target := strings.TrimSuffix(r.Target, ".")
			if target == "" {
				// RFC 2782: a target of "." says the service is not here.
				continue
			}
			ips, err := o.lookup.LookupHost(ctx, target)
			if err != nil {
				errs = append(errs, fmt.Errorf("cluster: resolve %s (SRV target of %s): %w", target, cname, err))
				continue
			}
			for _, ip := range ips {
				addrs = append(addrs, net.JoinHostPort(ip, strconv.Itoa(int(r.Port))))
			}
		}
		if addrs = normalize(addrs); len(addrs) == 0 {
			errs = append(errs, fmt.Errorf("%w: SRV %s", ErrNoAddresses, srvName(service, proto, name)))
			return nil, errors.Join(errs...)
		}
		// Some targets resolving is enough: the others are someone's
		// typo or outage, and the servers found can take the load.
		return addrs, nil
	})
}

func srvName(service, proto, name string) string {
	if service == "" && proto == "" {
		return name
	}
	return "_" + service + "._" + proto + "." + name
}

// normalize sorts addrs and drops duplicates and empty strings, so that a
// refresh compares lists, not orders.
func normalize(addrs []string) []string {
	out := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == "" })
	slices.Sort(out)
	return slices.Compact(out)
}
