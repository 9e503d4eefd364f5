package etcd

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"

	"github.com/hatrpc/hatrpc/pkg/cluster"
	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store"
	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store/storeserver"
	"github.com/hatrpc/hatrpc/pkg/server"
)

const (
	service = "hatrpc-test/store"
	ttl     = 2 * time.Second // short, so that expiry tests end soon; nothing assumes how soon
	tick    = 10 * time.Millisecond
)

// spread makes n calls through cl and counts them by the server that
// answered.
func spread(t *testing.T, cl *cluster.Client, n int) map[string]int {
	t.Helper()
	c := store.NewStoreClient(cl)
	got := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		addr, err := c.Get(ctx, "k")
		cancel()
		require.NoError(t, err)
		got[addr]++
	}
	return got
}

// keyLease returns the lease holding addr's key (0: no key).
func keyLease(t *testing.T, cli *clientv3.Client, addr string) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(tctx(t, waitLong), service+"/"+addr)
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return 0
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

func newResolver(t *testing.T, cli *clientv3.Client, log *slog.Logger) *Resolver {
	t.Helper()
	r, err := NewResolver(cli, service, WithLogger(log))
	require.NoError(t, err)
	return r
}

// registered waits until etcd lists exactly addrs for the service.
func registered(t *testing.T, r *Resolver, addrs ...string) {
	t.Helper()
	want := slices.Sorted(slices.Values(addrs))
	require.Eventually(t, func() bool {
		got, err := r.Resolve(tctx(t, waitLong))
		return err == nil && slices.Equal(got, want)
	}, waitLong, tick, "etcd lists %v", want)
}

// pair is etcd, two servers registered in it, and a cluster.Client
// watching them through its own etcd client.
type pair struct {
	e    *etcdServer
	a, b *regServer
	cli  *clientv3.Client // the resolver's
	r    *Resolver
	cl   *cluster.Client
}

// startPair starts a pair; the resolver's etcd client dials via(e) (a
// proxy) when via is not nil; opts go to both Registrars.
func startPair(t *testing.T, via func(*etcdServer) string, opts ...Option) *pair {
	t.Helper()
	p := &pair{e: startEtcd(t)}
	opts = append([]Option{WithTTL(ttl)}, opts...)
	p.a = startRegistered(t, p.e.endpoint(), service, opts...)
	p.b = startRegistered(t, p.e.endpoint(), service, opts...)
	endpoint := p.e.endpoint()
	if via != nil {
		endpoint = via(p.e)
	}
	p.cli = newClient(t, endpoint)
	t.Cleanup(func() { p.cli.Close() })
	p.r = newResolver(t, p.cli, quiet)
	registered(t, p.r, p.a.addr, p.b.addr)
	p.cl = dialCluster(t, p.r)
	require.Eventually(t, serversAre(p.cl, p.a.addr, p.b.addr), waitLong, tick)
	return p
}

// TestShutdownDeregisters kills servers gracefully: each one Serve
// registers is seen by a watching cluster.Client and gets calls; one
// that shuts down is gone from etcd when Shutdown returns and from the
// client's list right after; one that starts later joins.
func TestShutdownDeregisters(t *testing.T) {
	p := startPair(t, nil)
	e, a, b, cli, cl := p.e, p.a, p.b, p.cli, p.cl
	got := spread(t, cl, 40)
	assert.Equal(t, 20, got[a.addr])
	assert.Equal(t, 20, got[b.addr])

	c := startRegistered(t, e.endpoint(), service, WithTTL(ttl))
	require.Eventually(t, serversAre(cl, a.addr, b.addr, c.addr), waitLong, tick, "the new server joins")
	got = spread(t, cl, 30)
	assert.Equal(t, map[string]int{a.addr: 10, b.addr: 10, c.addr: 10}, got)

	b.shutdown(t)
	assert.Zero(t, keyLease(t, cli, b.addr), "Shutdown deleted the key")
	require.Eventually(t, serversAre(cl, a.addr, c.addr), waitLong, tick, "the client drops it")
	got = spread(t, cl, 30)
	assert.Equal(t, map[string]int{a.addr: 15, c.addr: 15}, got)
}

// TestKilledServerExpires kills a server's process (SIGKILL: no
// deregistration): its key goes when its lease expires, and the
// watching client drops it.
func TestKilledServerExpires(t *testing.T) {
	e := startEtcd(t)
	a := startRegistered(t, e.endpoint(), service, WithTTL(ttl))
	child, proc := startChild(t, e.endpoint(), service, ttl)
	cli := newClient(t, e.endpoint())
	defer cli.Close()
	r := newResolver(t, cli, quiet)
	registered(t, r, a.addr, child)
	id := keyLease(t, cli, child)
	require.NotZero(t, id, "the key is held by a lease")
	ttlResp, err := cli.TimeToLive(tctx(t, waitLong), id)
	require.NoError(t, err)
	assert.Equal(t, int64(2), ttlResp.GrantedTTL)

	cl := dialCluster(t, r)
	require.Eventually(t, serversAre(cl, a.addr, child), waitLong, tick)
	got := spread(t, cl, 20)
	assert.Equal(t, map[string]int{a.addr: 10, child: 10}, got, "the process serves")

	require.NoError(t, proc.Kill())
	require.Eventually(t, func() bool { return keyLease(t, cli, child) == 0 }, waitLong, tick, "the lease expires")
	require.Eventually(t, serversAre(cl, a.addr), waitLong, tick, "the client drops it")
	got = spread(t, cl, 20)
	assert.Equal(t, map[string]int{a.addr: 20}, got)
}

// TestEtcdRestart kills etcd (SIGKILL) and starts it again on the same
// data, after the servers' keep-alives have given their leases up: the
// client keeps calling meanwhile, the servers register again under new
// leases, and the resolver watches on (a server that joins or leaves
// after the restart is seen).
func TestEtcdRestart(t *testing.T) {
	rec := &recorder{}
	p := startPair(t, nil, WithLogger(slog.New(rec)))
	e, a, b, cli, cl := p.e, p.a, p.b, p.cli, p.cl
	before := []clientv3.LeaseID{keyLease(t, cli, a.addr), keyLease(t, cli, b.addr)}

	e.kill()
	got := spread(t, cl, 20)
	assert.Equal(t, map[string]int{a.addr: 10, b.addr: 10}, got, "calls go on without etcd")
	require.Eventually(t, func() bool { return rec.count("etcd: not registered") == 2 }, waitLong, tick,
		"both keep-alives give up")

	e.restart()
	require.Eventually(t, func() bool {
		la, lb := keyLease(t, cli, a.addr), keyLease(t, cli, b.addr)
		return la != 0 && lb != 0 && !slices.Contains(before, la) && !slices.Contains(before, lb)
	}, waitLong, tick, "registered again under new leases")
	require.Eventually(t, serversAre(cl, a.addr, b.addr), waitLong, tick)
	got = spread(t, cl, 20)
	assert.Equal(t, map[string]int{a.addr: 10, b.addr: 10}, got)

	c := startRegistered(t, e.endpoint(), service, WithTTL(ttl))
	require.Eventually(t, serversAre(cl, a.addr, b.addr, c.addr), waitLong, tick, "the watch resumed: a new server joins")
	a.shutdown(t)
	require.Eventually(t, serversAre(cl, b.addr, c.addr), waitLong, tick, "and one that leaves goes")
	got = spread(t, cl, 20)
	assert.Equal(t, map[string]int{b.addr: 10, c.addr: 10}, got)
}

// TestEtcdDownAtStart kills etcd before the servers start: Serve does
// not wait for it (calls are served at once), a server that shuts down
// meanwhile withdraws without waiting for etcd either, and the one still
// serving is registered once etcd is up.
func TestEtcdDownAtStart(t *testing.T) {
	e := startEtcd(t)
	cli := newClient(t, e.endpoint())
	defer cli.Close()
	r := newResolver(t, cli, quiet)
	e.kill()

	a := startRegistered(t, e.endpoint(), service, WithTTL(ttl))
	b := startRegistered(t, e.endpoint(), service, WithTTL(ttl))
	cl := dialCluster(t, cluster.Static(a.addr, b.addr))
	assert.Equal(t, map[string]int{a.addr: 10, b.addr: 10}, spread(t, cl, 20), "serving without etcd")
	b.shutdown(t)

	e.restart()
	registered(t, r, a.addr)
}

// TestLeaseRevoked kills a server's lease behind its back (revoked by
// another client, as `etcdctl lease revoke` would): the key goes with
// it, and the server's keep-alive, told the lease is gone, registers
// again under a new one.
func TestLeaseRevoked(t *testing.T) {
	p := startPair(t, nil)
	a, b, cli, cl := p.a, p.b, p.cli, p.cl

	old := keyLease(t, cli, a.addr)
	_, err := cli.Revoke(tctx(t, waitLong), old)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l := keyLease(t, cli, a.addr)
		return l != 0 && l != old
	}, waitLong, tick, "registered again under a new lease")
	require.Eventually(t, serversAre(cl, a.addr, b.addr), waitLong, tick)
	got := spread(t, cl, 20)
	assert.Equal(t, map[string]int{a.addr: 10, b.addr: 10}, got)
}

// TestPartitionKeepsServers kills the link between the resolver's etcd
// client and etcd (a TCP proxy cut): the client keeps the servers it
// knows and keeps calling them; a server that registers meanwhile is
// seen once the link is back.
func TestPartitionKeepsServers(t *testing.T) {
	var link *proxy
	p := startPair(t, func(e *etcdServer) string {
		link = startProxy(t, e.endpoint())
		return link.addr()
	})
	e, a, b, cli, cl := p.e, p.a, p.b, p.cli, p.cl

	link.setCut(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := cli.Get(ctx, "anything")
	cancel()
	require.Error(t, err, "the resolver's etcd is out of reach")
	direct := newClient(t, e.endpoint())
	defer direct.Close()
	dr := newResolver(t, direct, quiet)
	c := startRegistered(t, e.endpoint(), service, WithTTL(ttl))
	registered(t, dr, a.addr, b.addr, c.addr)
	got := spread(t, cl, 40)
	assert.Equal(t, map[string]int{a.addr: 20, b.addr: 20}, got, "the known servers, nothing else")
	assert.True(t, serversAre(cl, a.addr, b.addr)())

	link.setCut(false)
	require.Eventually(t, serversAre(cl, a.addr, b.addr, c.addr), waitLong, tick, "the watch resumes")
	got = spread(t, cl, 30)
	assert.Equal(t, map[string]int{a.addr: 10, b.addr: 10, c.addr: 10}, got)
}

// TestGarbageSkipped writes entries that name no server, before and
// while the client watches: each is skipped and logged once per key; a
// server's key rewritten as garbage drops the server; entries written by
// etcd's own endpoints.Manager are read.
func TestGarbageSkipped(t *testing.T) {
	e := startEtcd(t)
	cli := newClient(t, e.endpoint())
	defer cli.Close()
	a := startRegistered(t, e.endpoint(), service, WithTTL(ttl))
	// b is announced by etcd's own naming/endpoints package.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	bs := server.New(server.WithLogger(quiet))
	storeserver.RegisterStore(bs, &named{addr: ln.Addr().String()})
	served := make(chan error, 1)
	go func() { served <- bs.Serve(ln) }()
	defer func() { bs.Close(); <-served }()
	b := ln.Addr().String()
	em, err := endpoints.NewManager(cli, service)
	require.NoError(t, err)
	require.NoError(t, em.AddEndpoint(tctx(t, waitLong), service+"/"+b, endpoints.Endpoint{Addr: b}))

	garbage := map[string]string{
		"notjson":   "hello",
		"noaddr":    `{"Op":0,"Metadata":{"weight":1}}`,
		"noport":    `{"Addr":"127.0.0.1"}`,
		"badport":   `{"Addr":"127.0.0.1:99999"}`,
		"allifaces": `{"Addr":"0.0.0.0:9090"}`,
		"array":     `[1,2,3]`,
		"null":      `null`,
	}
	for k, v := range garbage {
		_, err := cli.Put(tctx(t, waitLong), service+"/"+k, v)
		require.NoError(t, err)
	}
	rec := &recorder{}
	r := newResolver(t, cli, slog.New(rec))
	const skipped = "etcd: skipping an entry that names no server key=" + service + "/"
	for range 2 {
		got, err := r.Resolve(tctx(t, waitLong))
		require.NoError(t, err)
		assert.Equal(t, slices.Sorted(slices.Values([]string{a.addr, b})), got)
	}
	for k := range garbage {
		assert.Equal(t, 1, rec.count(skipped+k), "%s logged once", k)
	}

	cl := dialCluster(t, r)
	require.Eventually(t, serversAre(cl, a.addr, b), waitLong, tick)
	assert.Equal(t, map[string]int{a.addr: 10, b: 10}, spread(t, cl, 20))
	put := func(key, v string) {
		t.Helper()
		_, err := cli.Put(tctx(t, waitLong), service+"/"+key, v)
		require.NoError(t, err)
	}
	put("late", "{")
	put("late", "{")
	put(b, `{"Addr":""}`) // b's key turns into garbage
	require.Eventually(t, serversAre(cl, a.addr), waitLong, tick, "b is no longer named")
	assert.Equal(t, 1, rec.count(skipped+"late"), "logged once though written twice")
	assert.Equal(t, 1, rec.count(skipped+b))
	assert.Equal(t, map[string]int{a.addr: 20}, spread(t, cl, 20))

	put(b, `{"Addr":"`+b+`"}`)
	require.Eventually(t, serversAre(cl, a.addr, b), waitLong, tick, "b is back")
	put(b, `{"Addr":"`+b+`"`)
	require.Eventually(t, serversAre(cl, a.addr), waitLong, tick)
	assert.Equal(t, 2, rec.count(skipped+b), "garbage again after a good entry is logged again")
	for k := range garbage {
		assert.Equal(t, 1, rec.count(skipped+k), "%s still logged once", k)
	}
}

// TestRegistrarFormat: the entry is etcd's naming/endpoints format with
// the metadata given, under a lease of the TTL given; a server listening
// on all interfaces is refused unless WithAdvertise names its address.
func TestRegistrarFormat(t *testing.T) {
	e := startEtcd(t)
	cli := newClient(t, e.endpoint())
	defer cli.Close()

	reg, err := NewRegistrar(cli, service, WithLogger(quiet))
	require.NoError(t, err)
	s := server.New(server.WithLogger(quiet), server.WithRegistrar(reg))
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	err = s.Serve(ln)
	require.ErrorIs(t, err, ErrBadAddress)
	require.EqualError(t, err, `etcd: register `+service+`: etcd: not a dialable host:port: "[::]:`+port+`" has the unspecified host :: (listening on all interfaces), which names no server to its clients; WithAdvertise gives the address clients dial`)
	require.NoError(t, s.Close())

	ln, err = net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	adv := "127.0.0.1:" + port
	reg, err = NewRegistrar(cli, service, WithLogger(quiet), WithTTL(3*time.Second), WithAdvertise(adv),
		WithMetadata(map[string]any{"weight": 3, "transport": "shm"}))
	require.NoError(t, err)
	s = server.New(server.WithLogger(quiet), server.WithRegistrar(reg))
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	em, err := endpoints.NewManager(cli, service)
	require.NoError(t, err)
	var eps endpoints.Key2EndpointMap
	require.Eventually(t, func() bool {
		eps, err = em.List(tctx(t, waitLong))
		return err == nil && len(eps) == 1
	}, waitLong, tick)
	assert.Equal(t, endpoints.Key2EndpointMap{service + "/" + adv: {Addr: adv,
		Metadata: map[string]any{"weight": 3.0, "transport": "shm"}}}, eps)
	resp, err := cli.TimeToLive(tctx(t, waitLong), keyLease(t, cli, adv))
	require.NoError(t, err)
	assert.Equal(t, int64(3), resp.GrantedTTL)

	require.NoError(t, s.Shutdown(tctx(t, waitLong)))
	require.ErrorIs(t, <-served, server.ErrServerClosed)
	eps, err = em.List(tctx(t, waitLong))
	require.NoError(t, err)
	assert.Empty(t, eps)

	for _, bad := range []struct {
		opt  Option
		want string
	}{
		{WithTTL(500 * time.Millisecond), "etcd: NewRegistrar: TTL 500ms is under 1s"},
		{WithMetadata(func() {}), "etcd: NewRegistrar: metadata: json: unsupported type: func()"},
		{WithAdvertise("nohost"), "etcd: NewRegistrar: advertised address: etcd: not a dialable host:port: address nohost: missing port in address"},
	} {
		_, err := NewRegistrar(cli, service, bad.opt)
		assert.EqualError(t, err, bad.want)
	}
	_, err = NewRegistrar(nil, service)
	assert.EqualError(t, err, "etcd: NewRegistrar: nil etcd client")
	_, err = NewResolver(cli, "")
	assert.EqualError(t, err, "etcd: NewResolver: empty service name")
}

// TestTwoListeners: a server serving two listeners registers both
// addresses under its one lease (the second while the first is kept
// alive), and Shutdown withdraws both.
func TestTwoListeners(t *testing.T) {
	e := startEtcd(t)
	cli := newClient(t, e.endpoint())
	defer cli.Close()
	r := newResolver(t, cli, quiet)
	reg, err := NewRegistrar(cli, service, WithLogger(quiet), WithTTL(ttl))
	require.NoError(t, err)
	s := server.New(server.WithLogger(quiet), server.WithRegistrar(reg))
	storeserver.RegisterStore(s, &named{addr: "either"})
	var addrs []string
	served := make(chan error, 2)
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs = append(addrs, ln.Addr().String())
		go func() { served <- s.Serve(ln) }()
		registered(t, r, addrs...)
	}
	assert.Equal(t, keyLease(t, cli, addrs[0]), keyLease(t, cli, addrs[1]), "one lease")

	require.NoError(t, s.Shutdown(tctx(t, waitLong)))
	for range 2 {
		require.ErrorIs(t, <-served, server.ErrServerClosed)
	}
	resp, err := cli.Get(tctx(t, waitLong), service+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.Zero(t, resp.Count)
}
