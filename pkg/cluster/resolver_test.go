package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// fakeDNS answers from tables; nothing touches the network.
type fakeDNS struct {
	hosts map[string][]string
	srv   map[string][]*net.SRV // key: _service._proto.name
}

var errNXDomain = errors.New("no such host")

func (f *fakeDNS) LookupHost(_ context.Context, host string) ([]string, error) {
	if ips, ok := f.hosts[host]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: errNXDomain.Error(), Name: host, IsNotFound: true}
}

func (f *fakeDNS) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	key := "_" + service + "._" + proto + "." + name
	if recs, ok := f.srv[key]; ok {
		return key + ".", recs, nil
	}
	return "", nil, &net.DNSError{Err: errNXDomain.Error(), Name: key, IsNotFound: true}
}

func TestResolvers(t *testing.T) {
	dns := &fakeDNS{
		hosts: map[string][]string{
			"kv.internal":    {"127.0.0.3", "127.0.0.1", "127.0.0.2", "127.0.0.1"},
			"six.internal":   {"::1"},
			"a.internal":     {"127.0.0.1"},
			"b.internal":     {"127.0.0.2"},
			"spare.internal": {"127.0.0.9"},
			"empty.internal": {},
		},
		srv: map[string][]*net.SRV{
			"_hatkv._tcp.kv.internal": {
				{Target: "a.internal.", Port: 9090, Priority: 10},
				{Target: "b.internal.", Port: 9091, Priority: 10},
				{Target: "spare.internal.", Port: 9092, Priority: 20}, // backup: not used while priority 10 answers
			},
			"_hatkv._tcp.half.internal": {
				{Target: "a.internal.", Port: 9090, Priority: 1},
				{Target: "gone.internal.", Port: 9090, Priority: 1},
			},
			"_hatkv._tcp.none.internal": {{Target: ".", Port: 0}},
			"_hatkv._tcp.lost.internal": {{Target: "gone.internal.", Port: 1}},
		},
	}
	lk := WithLookup(dns)
	tests := []struct {
		name string
		r    Resolver
		want []string
		err  string // exact text
		is   error
	}{
		{"static: sorted, deduplicated", Static("127.0.0.1:2", "127.0.0.1:1", "", "127.0.0.1:2"), []string{"127.0.0.1:1", "127.0.0.1:2"}, "", nil},
		{"static: empty", Static(), nil, "cluster: resolver found no addresses: empty static list", ErrNoAddresses},
		{"A records with the port", DNS("kv.internal", 9090, lk), []string{"127.0.0.1:9090", "127.0.0.2:9090", "127.0.0.3:9090"}, "", nil},
		{"AAAA record", DNS("six.internal", 9090, lk), []string{"[::1]:9090"}, "", nil},
		{"unknown host", DNS("nope.internal", 1, lk), nil, "cluster: resolve nope.internal: lookup nope.internal: no such host", nil},
		{"host without addresses", DNS("empty.internal", 1, lk), nil, "cluster: resolver found no addresses: empty.internal has no A/AAAA records", ErrNoAddresses},
		{"SRV: lowest priority, each target's port", SRV("hatkv", "tcp", "kv.internal", lk), []string{"127.0.0.1:9090", "127.0.0.2:9091"}, "", nil},
		{"SRV: a target that does not resolve is skipped", SRV("hatkv", "tcp", "half.internal", lk), []string{"127.0.0.1:9090"}, "", nil},
		{"SRV: target '.' means no service", SRV("hatkv", "tcp", "none.internal", lk), nil, "cluster: resolver found no addresses: SRV _hatkv._tcp.none.internal", ErrNoAddresses},
		{"SRV: no target resolves", SRV("hatkv", "tcp", "lost.internal", lk), nil,
			"cluster: resolve gone.internal (SRV target of _hatkv._tcp.lost.internal.): lookup gone.internal: no such host\n" +
				"cluster: resolver found no addresses: SRV _hatkv._tcp.lost.internal", ErrNoAddresses},
		{"SRV: unknown name", SRV("hatkv", "tcp", "nope.internal", lk), nil,
			"cluster: resolve SRV _hatkv._tcp.nope.internal: lookup _hatkv._tcp.nope.internal: no such host", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.r.Resolve(tctx(t, 5*time.Second))
			if tt.err != "" {
				require.Error(t, err)
				assert.Equal(t, tt.err, err.Error())
				if tt.is != nil {
					assert.ErrorIs(t, err, tt.is)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestRefreshFollowsResolver: servers the resolver adds are probed in
// and get calls; servers it drops stop getting them; a failing resolver
// keeps the list it had.
func TestRefreshFollowsResolver(t *testing.T) {
	ha, hb := newStoreHandler(), newStoreHandler()
	a, b := startServer(t, ha), startServer(t, hb)
	var mu sync.Mutex
	list := []string{a.addr}
	var fail bool
	r := ResolverFunc(func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return nil, errors.New("dns down")
		}
		return append([]string(nil), list...), nil
	})
	set := func(addrs []string, broken bool) {
		mu.Lock()
		list, fail = addrs, broken
		mu.Unlock()
	}
	cl, err := Dial(tctx(t, 5*time.Second), r, fastOptions(WithRefresh(5*time.Millisecond))...)
	require.NoError(t, err)
	defer cl.Close()
	both := normalize([]string{a.addr, b.addr})
	set(both, false)
	require.Eventually(t, serversAre(cl, both...), testenv.HangGuard(10*time.Second), 5*time.Millisecond)
	get := func() {
		t.Helper()
		for range 10 {
			require.NoError(t, cl.Call(tctx(t, 5*time.Second), getMethod(), getArgs(), getResult()))
		}
	}
	get()
	assert.Equal(t, int64(5), hb.gets.Load(), "the added server takes its share")

	set(nil, true) // the resolver breaks: nothing changes
	get()
	assert.Equal(t, int64(10), hb.gets.Load())

	set([]string{a.addr}, false)
	require.Eventually(t, serversAre(cl, a.addr), testenv.HangGuard(10*time.Second), 5*time.Millisecond)
	before := ha.gets.Load()
	get()
	assert.Equal(t, int64(10), hb.gets.Load(), "the dropped server gets nothing more")
	assert.Equal(t, before+10, ha.gets.Load())

	// A listed server that is dead is probed; once dropped, it no longer is.
	b.kill()
	withDead := normalize([]string{a.addr, b.addr})
	set(withDead, false)
	require.Eventually(t, func() bool { return len(cl.Servers()) == 2 }, testenv.HangGuard(10*time.Second), 5*time.Millisecond)
	eb := cl.endpointFor(b.addr)
	require.NotNil(t, eb)
	require.Eventually(t, func() bool {
		st := statusOf(cl, b.addr)
		return !st.Up && errors.Is(st.Err, client.ErrConnClosed)
	}, testenv.HangGuard(10*time.Second), 5*time.Millisecond, "a failed probe")
	set([]string{a.addr}, false)
	require.Eventually(t, func() bool {
		eb.mu.Lock()
		defer eb.mu.Unlock()
		return !eb.probing
	}, testenv.HangGuard(10*time.Second), 5*time.Millisecond, "the prober of a dropped server stops")
	get()
}
