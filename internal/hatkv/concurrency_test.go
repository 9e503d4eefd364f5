package hatkv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
)

// model is one client's view of the keys it owns. Each client writes only
// its own keys (so the model is exact under any interleaving) and reads a
// shared, read-only key set as well, so the server still sees every
// operation from 64 clients at once.
type model map[string]hatkv.Record

func (m model) merge(key string, r hatkv.Record) {
	cur := m[key]
	if cur == nil {
		cur = hatkv.Record{}
		m[key] = cur
	}
	for f, v := range r {
		cur[f] = v
	}
}

func randRecord(r *rand.Rand) hatkv.Record {
	rec := hatkv.Record{}
	for i := 0; i < 1+r.IntN(4); i++ {
		rec[fmt.Sprint("f", r.IntN(6))] = []byte(fmt.Sprint(r.Uint32()))
	}
	return rec
}

func sharedKey(i int) string { return fmt.Sprintf("shared-%03d", i) }

func sharedRecord(i int) hatkv.Record {
	return hatkv.Record{"v": []byte(fmt.Sprint("shared value ", i))}
}

type mismatches struct {
	n    atomic.Int64
	mu   sync.Mutex
	some []string
}

func (m *mismatches) add(format string, args ...any) {
	m.n.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.some) < 10 {
		m.some = append(m.some, fmt.Sprintf(format, args...))
	}
}

func runModelClient(ctx context.Context, kv *hatkv.HatKVClient, id int, ops *atomic.Int64, bad *mismatches) error {
	r := rand.New(rand.NewPCG(uint64(id), 42))
	own := model{}
	prefix := fmt.Sprintf("c%02d-", id)
	key := func() string { return fmt.Sprintf("%sk%02d", prefix, r.IntN(40)) }
	for ctx.Err() == nil {
		var err error
		switch op := r.IntN(8); op {
		case 0: // Put
			k, v := key(), randRecord(r)
			if err = kv.Put(ctx, k, v); err == nil {
				own.merge(k, v)
			}
		case 1: // Get
			k := key()
			var got hatkv.Record
			got, err = kv.Get(ctx, k, nil)
			want, ok := own[k]
			var nf *hatkv.NotFound
			switch {
			case errors.As(err, &nf):
				if ok {
					bad.add("get %s: not found, want %v", k, want)
				}
				err = nil
			case err == nil && (!ok || !maps.EqualFunc(got, want, bytesEqual)):
				bad.add("get %s = %v, want %v (exists=%v)", k, got, want, ok)
			}
		case 2: // Delete
			k := key()
			err = kv.Delete(ctx, k)
			_, ok := own[k]
			var nf *hatkv.NotFound
			switch {
			case errors.As(err, &nf):
				if ok {
					bad.add("delete %s: not found, but it exists", k)
				}
				err = nil
			case err == nil && !ok:
				bad.add("delete %s succeeded on a missing key", k)
			}
			delete(own, k)
		case 3: // MultiPut
			var recs []*hatkv.KeyRecord
			for i := 0; i < 1+r.IntN(10); i++ {
				recs = append(recs, &hatkv.KeyRecord{Key: key(), Record: randRecord(r)})
			}
			if err = kv.MultiPut(ctx, recs); err == nil {
				for _, kr := range recs {
					own.merge(kr.Key, kr.Record)
				}
			}
		case 4: // MultiGet over own and shared keys
			keys := []string{key(), sharedKey(r.IntN(50)), key()}
			var res []*hatkv.Lookup
			if res, err = kv.MultiGet(ctx, keys, nil); err == nil {
				for i, k := range keys {
					want, ok := own[k]
					if i == 1 {
						want, ok = sharedRecord(r2i(k)), true
					}
					if res[i].Found != ok || (ok && !maps.EqualFunc(res[i].Record, want, bytesEqual)) {
						bad.add("multiget %s = %v, want %v (found=%v)", k, res[i].Record, want, ok)
					}
				}
			}
		case 5: // Scan own prefix
			n := 1 + r.IntN(15)
			var res []*hatkv.KeyRecord
			if res, err = kv.Scan(ctx, prefix, int32(n), nil); err == nil {
				want := slices.Sorted(maps.Keys(own))
				var got []string
				for _, kr := range res {
					if strings.HasPrefix(kr.Key, prefix) {
						got = append(got, kr.Key)
						if !maps.EqualFunc(kr.Record, own[kr.Key], bytesEqual) {
							bad.add("scan record %s = %v, want %v", kr.Key, kr.Record, own[kr.Key])
						}
					}
				}
				if len(got) != min(n, len(want)) || !slices.Equal(got, want[:len(got)]) {
					bad.add("scan %s %d = %v, want prefix of %v", prefix, n, got, want)
				}
			}
		case 6: // Get shared
			i := r.IntN(50)
			var got hatkv.Record
			if got, err = kv.Get(ctx, sharedKey(i), nil); err == nil && !maps.EqualFunc(got, sharedRecord(i), bytesEqual) {
				bad.add("shared %d = %v", i, got)
			}
		case 7:
			_, err = kv.Stats(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("client %d: %w", id, err)
		}
		ops.Add(1)
	}
	return nil
}

func r2i(k string) int {
	var i int
	_, _ = fmt.Sscanf(k, "shared-%03d", &i)
	return i
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// TestConcurrentClientsAgainstModel runs 64 clients, each with its own
// connection, mixing every operation; zero mismatches allowed. A few
// seconds normally, one minute with HATKV_LONG=1.
func TestConcurrentClientsAgainstModel(t *testing.T) {
	dur := 3 * time.Second
	if os.Getenv("HATKV_LONG") == "1" {
		dur = time.Minute
	}
	ts := startServer(t, "")
	ctx := testCtx(t, dur+60*time.Second)
	for i := 0; i < 50; i++ {
		require.NoError(t, ts.kv.Put(ctx, sharedKey(i), sharedRecord(i)))
	}
	const clients = 64
	c, err := Dial(ctx, ts.addr, WithConns(clients))
	require.NoError(t, err)
	defer c.Close()

	// Cancel rather than a deadline: a client that checks the deadline
	// itself could fail a call before ctx.Err() reports it.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(dur, cancel)
	defer stop.Stop()
	var ops atomic.Int64
	var bad mismatches
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		kv := c.KV()
		go func() { errs <- runModelClient(runCtx, kv, i, &ops, &bad) }()
	}
	for i := 0; i < clients; i++ {
		require.NoError(t, <-errs)
	}
	assert.Zero(t, bad.n.Load(), "mismatches: %v", bad.some)
	assert.Greater(t, ops.Load(), int64(clients), "every client made progress")
	t.Logf("%d clients, %v: %d operations, %d mismatches", clients, dur, ops.Load(), bad.n.Load())
}
