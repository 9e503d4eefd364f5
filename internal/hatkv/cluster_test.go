package hatkv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestRingErrors(t *testing.T) {
	_, err := NewRing(nil, 0)
	require.ErrorIs(t, err, ErrConfig)
	assert.EqualError(t, err, "hatkv: invalid configuration: a ring needs at least one server")
	_, err = NewRing([]string{"a:1", "b:1", "a:1"}, 0)
	assert.EqualError(t, err, "hatkv: invalid configuration: server a:1 named twice")
}

// TestRingBalance: with 3 servers every one owns a third of the keys
// within ±10 %, whatever their (loopback) addresses, and the owner of a
// key does not depend on the order the addresses are given in.
func TestRingBalance(t *testing.T) {
	sets := [][]string{
		{"127.0.0.1:9090", "127.0.0.1:9091", "127.0.0.1:9092"},
		{"10.0.0.1:9090", "10.0.0.2:9090", "10.0.0.3:9090"},
		{"127.0.0.1:41234", "127.0.0.1:35011", "127.0.0.1:58777"},
		{"kv-a:1", "kv-b:1", "kv-c:1"},
	}
	const keys = 30000
	for _, names := range sets {
		t.Run(names[0], func(t *testing.T) {
			r, err := NewRing(names, 0)
			require.NoError(t, err)
			rev := slices.Clone(names)
			slices.Reverse(rev)
			r2, err := NewRing(rev, 0)
			require.NoError(t, err)
			cnt := make([]int, len(names))
			for k := 0; k < keys; k++ {
				key := ycsbKey(k)
				cnt[r.Owner(key)]++
				require.Equal(t, r.OwnerName(key), r2.OwnerName(key), "owner of %s depends on the address order", key)
			}
			assertSpread(t, cnt, keys)
		})
	}
}

// ycsbKey is a YCSB-style key (user + hashed number), as bench makes.
func ycsbKey(k int) string { return fmt.Sprintf("user%d", uint64(k)*0x9e3779b97f4a7c15>>1) }

func assertSpread(t *testing.T, cnt []int, total int) {
	t.Helper()
	fair := float64(total) / float64(len(cnt))
	for i, c := range cnt {
		dev := float64(c)/fair - 1
		t.Logf("server %d: %d keys (%+.1f %%)", i, c, 100*dev)
		assert.LessOrEqual(t, math.Abs(dev), 0.10, "server %d holds %d of %d keys", i, c, total)
	}
}

// TestRingAddServer: adding a fourth server moves only keys to the new
// server, about a quarter of them; removing it moves them back.
func TestRingAddServer(t *testing.T) {
	three := []string{"127.0.0.1:9090", "127.0.0.1:9091", "127.0.0.1:9092"}
	r3, err := NewRing(three, 0)
	require.NoError(t, err)
	r4, err := NewRing(append(slices.Clone(three), "127.0.0.1:9093"), 0)
	require.NoError(t, err)
	const keys = 100000
	moved := 0
	for k := 0; k < keys; k++ {
		key := ycsbKey(k)
		a, b := r3.OwnerName(key), r4.OwnerName(key)
		if a != b {
			moved++
			require.Equal(t, "127.0.0.1:9093", b, "key %s moved between two old servers", key)
		}
	}
	frac := float64(moved) / keys
	t.Logf("adding a 4th server moved %d of %d keys (%.1f %%; ideal 25 %%)", moved, keys, 100*frac)
	assert.InDelta(t, 0.25, frac, 0.025)
}

// startCluster starts n servers and a Cluster over them.
func startCluster(t *testing.T, n int, opts ...Option) ([]*testServer, *Cluster) {
	t.Helper()
	var servers []*testServer
	var addrs []string
	for i := 0; i < n; i++ {
		ts := startServer(t, "", opts...)
		servers = append(servers, ts)
		addrs = append(addrs, ts.addr)
	}
	cl, err := DialCluster(testCtx(t, 30*time.Second), addrs)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	return servers, cl
}

// TestClusterThreeServers: keys written through the cluster land on
// their ring owner only, spread within ±10 %; reads, MultiGet (in order,
// across servers), MultiPut, Scan (global key order) and Stats (sums)
// behave as one server holding every key would.
func TestClusterThreeServers(t *testing.T) {
	servers, cl := startCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)

	// Load through YCSB, as hatkv bench does: 12,000 keys keep the
	// sampling noise (1.4 % per server) well inside the ±10 % asserted.
	w, err := ycsb.NewWorkload(ycsbConfig(t, 12000))
	require.NoError(t, err)
	rep, err := ycsb.Run(ctx, YCSB{Cluster: cl}, w, ycsb.RunOptions{Threads: 4, Load: true, Seed: 1}, ycsb.NewMeasurements())
	require.NoError(t, err)
	require.Equal(t, int64(12000), rep.Operations)

	per, err := cl.ServerStats(ctx)
	require.NoError(t, err)
	cnt := make([]int, 3)
	for i, st := range per {
		cnt[i] = int(st.Records)
	}
	assertSpread(t, cnt, 12000)
	routed := cl.Routed()
	for i := range routed {
		assert.Equal(t, uint64(cnt[i]), routed[i], "server %d: keys routed = records stored", i)
	}
	sum, err := cl.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(12000), sum.Records)

	// Every server holds exactly the keys the ring gives it.
	var keys []string
	for i := 0; i < 40; i++ {
		keys = append(keys, fmt.Sprintf("k%03d", i))
		require.NoError(t, cl.Put(ctx, keys[i], rec("f", keys[i])))
	}
	for _, k := range keys {
		for i, ts := range servers {
			_, err := ts.kv.Get(ctx, k, nil)
			if i == cl.Owner(k) {
				assert.NoError(t, err, "%s on its owner", k)
			} else {
				var nf *hatkv.NotFound
				assert.ErrorAs(t, err, &nf, "%s only on its owner", k)
			}
		}
	}

	// MultiGet across servers, answers in the caller's order: the ring is
	// named by the servers' (random) ports, so the batch takes each
	// server's last key by itself, plus a missing key among them.
	var ask []string
	for i := len(keys) - 1; i >= 0; i-- {
		if !slices.ContainsFunc(ask, func(k string) bool { return cl.Owner(k) == cl.Owner(keys[i]) }) {
			ask = append(ask, keys[i])
		}
	}
	ask = slices.Insert(ask, 1, "absent")
	got, err := cl.MultiGet(ctx, ask, nil)
	require.NoError(t, err)
	require.Len(t, got, len(ask))
	for i, k := range ask {
		if k == "absent" {
			assert.False(t, got[i].Found)
			continue
		}
		assert.Equal(t, rec("f", k), got[i].Record, k)
	}
	owners := map[int]bool{}
	for _, k := range ask {
		owners[cl.Owner(k)] = true
	}
	assert.Greater(t, len(owners), 1, "the batch spans servers")

	// MultiPut across servers.
	var batch []*hatkv.KeyRecord
	for _, k := range keys[:10] {
		batch = append(batch, &hatkv.KeyRecord{Key: k, Record: rec("g", "2")})
	}
	require.NoError(t, cl.MultiPut(ctx, batch))
	r, err := cl.Get(ctx, keys[3], nil)
	require.NoError(t, err)
	assert.Equal(t, rec("f", keys[3], "g", "2"), r)

	// Scan: the first 7 keys >= k010 in global order.
	sc, err := cl.Scan(ctx, "k010", 7, []string{"f"})
	require.NoError(t, err)
	var scanned []string
	for _, kr := range sc {
		scanned = append(scanned, kr.Key)
		assert.Equal(t, rec("f", kr.Key), kr.Record)
	}
	assert.Equal(t, keys[10:17], scanned)
	// Past k039 come the YCSB keys (user…), merged from every server.
	tail, err := cl.Scan(ctx, "k038", 60, nil)
	require.NoError(t, err)
	require.Len(t, tail, 60)
	var tailKeys []string
	from := map[int]int{}
	for _, kr := range tail {
		tailKeys = append(tailKeys, kr.Key)
		from[cl.Owner(kr.Key)]++
	}
	assert.Equal(t, []string{"k038", "k039"}, tailKeys[:2])
	assert.True(t, slices.IsSorted(tailKeys), "%v", tailKeys)
	assert.Len(t, from, 3, "the 58 user keys come from every server")
	for _, k := range tailKeys[2:] {
		assert.Regexp(t, `^user\d+$`, k)
	}

	// Errors keep the IDL's exception and name the server.
	_, err = cl.MultiGet(ctx, []string{keys[1], ""}, nil)
	var bad *hatkv.InvalidArgument
	require.ErrorAs(t, err, &bad)
	assert.Contains(t, err.Error(), "hatkv: multiget on 127.0.0.1:")
	_, err = cl.Scan(ctx, "", 0, nil)
	require.ErrorAs(t, err, &bad)
}

// TestClusterMultiPutPartial: a MultiPut whose part for one server fails
// says which servers committed theirs.
func TestClusterMultiPutPartial(t *testing.T) {
	_, cl := startCluster(t, 2)
	ctx := testCtx(t, 30*time.Second)
	var good string
	var bad string
	for i := 0; good == "" || bad == ""; i++ {
		k := fmt.Sprintf("p%d", i)
		if cl.Owner(k) == 0 && good == "" {
			good = k
		}
		if cl.Owner(k) == 1 && bad == "" {
			bad = k
		}
	}
	err := cl.MultiPut(ctx, []*hatkv.KeyRecord{{Key: good, Record: rec("f", "1")}, {Key: bad, Record: hatkv.Record{}}})
	var ia *hatkv.InvalidArgument
	require.ErrorAs(t, err, &ia)
	assert.Contains(t, err.Error(), "(the records for "+cl.Addrs()[0]+" were committed: MultiPut is atomic per server only)")
	_, err = cl.Get(ctx, good, nil)
	assert.NoError(t, err)
}

// TestClusterServerDown: a server that is not there fails the dial with
// its address; the error is a dial error, not a hang.
// TestClusterServerDown: with one of three servers down from the start,
// the live servers' keys all work and the down server's keys fail with an
// error naming it; a server that comes up later is used; with every
// server down, the dial fails naming each.
func TestClusterServerDown(t *testing.T) {
	live := []*testServer{startServer(t, ""), startServer(t, "")}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	addrs := []string{live[0].addr, dead, live[1].addr}
	ctx := testCtx(t, 60*time.Second)
	cl, err := DialCluster(ctx, addrs)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })

	const n = 300
	var deadKeys, liveKeys []string
	for k := range n {
		key := fmt.Sprintf("user%d", k)
		err := cl.Put(ctx, key, hatkv.Record{"f": []byte(key)})
		if addrs[cl.Owner(key)] == dead {
			deadKeys = append(deadKeys, key)
			var down *ServerDownError
			require.ErrorAs(t, err, &down, key)
			require.Equal(t, dead, down.Addr)
			require.ErrorContains(t, err, "hatkv: server "+dead+" is unreachable (its keys fail, the other servers' keys do not): ")
			_, err = cl.Get(ctx, key, nil)
			require.ErrorAs(t, err, &down, key)
			continue
		}
		liveKeys = append(liveKeys, key)
		require.NoError(t, err, key)
		rec, err := cl.Get(ctx, key, nil)
		require.NoError(t, err, key)
		require.Equal(t, []byte(key), rec["f"])
	}
	require.NotEmpty(t, deadKeys)
	require.Len(t, liveKeys, n-len(deadKeys))
	got, err := cl.MultiGet(ctx, liveKeys, nil)
	require.NoError(t, err)
	require.Len(t, got, len(liveKeys))
	_, err = cl.MultiGet(ctx, append([]string{deadKeys[0]}, liveKeys...), nil)
	require.ErrorContains(t, err, "hatkv: server "+dead+" is unreachable")
	_, err = cl.Scan(ctx, "", 10, nil)
	require.ErrorContains(t, err, "hatkv: server "+dead+" is unreachable", "a scan in key order needs every server")
	_, err = cl.Stats(ctx)
	require.ErrorContains(t, err, "hatkv: server "+dead+" is unreachable")

	// The server comes up on its address: the next operation after the
	// failed dial's hold-off dials it again and its keys work.
	srv, err := Open(ctx, t.TempDir(), WithLogger(quietLogger()), WithSetting("sync", "nosync"), WithSetting("mapsize", "64MiB"))
	require.NoError(t, err)
	ln, err = net.Listen("tcp", dead)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, cl.Close()) // before the server's shutdown waits for its connections
		sctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
		defer cancel()
		require.NoError(t, srv.Shutdown(sctx))
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		return cl.Put(ctx, deadKeys[0], hatkv.Record{"f": []byte("back")}) == nil
	}, testenv.HangGuard(30*time.Second), 50*time.Millisecond)
	rec, err := cl.Get(ctx, deadKeys[0], nil)
	require.NoError(t, err)
	require.Equal(t, []byte("back"), rec["f"])

	// No server at all: the dial fails and names every one.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead2 := ln2.Addr().String()
	require.NoError(t, ln2.Close())
	ln3, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead3 := ln3.Addr().String()
	require.NoError(t, ln3.Close())
	_, err = DialCluster(testCtx(t, 20*time.Second), []string{dead2, dead3})
	require.ErrorContains(t, err, "hatkv: dial "+dead2)
	require.ErrorContains(t, err, "hatkv: dial "+dead3)
	assert.False(t, errors.Is(err, ErrConfig))
}

func ycsbConfig(t *testing.T, records int) *ycsb.Config {
	t.Helper()
	p := ycsb.NewProperties()
	require.NoError(t, p.LoadWorkload("workloadb"))
	require.NoError(t, p.SetPair(fmt.Sprintf("recordcount=%d", records)))
	require.NoError(t, p.SetPair("fieldcount=2"))
	require.NoError(t, p.SetPair("fieldlength=10"))
	cfg, err := ycsb.ParseConfig(p)
	require.NoError(t, err)
	return cfg
}
