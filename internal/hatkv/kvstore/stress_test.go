package kvstore

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The stress duration defaults to a few seconds; a soak run can ask for
// more with -kvstore.stress=1m or HATKV_STRESS_DURATION=1m.
var stressFlag = flag.Duration("kvstore.stress", 0, "duration of each TestConcurrentModel run")

func stressDuration(t *testing.T) time.Duration {
	if *stressFlag > 0 {
		return *stressFlag
	}
	if v := os.Getenv("HATKV_STRESS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		return d
	}
	return 2 * time.Second
}

const (
	stressWorkers = 64
	stressKeys    = 32 // per worker
	stressFields  = 5
)

func stressKey(w, i int) string { return fmt.Sprintf("s%02d-%03d", w, i) }

func owner(key string) int {
	var w, i int
	if _, err := fmt.Sscanf(key, "s%02d-%03d", &w, &i); err != nil {
		return -1
	}
	return w
}

// Field values carry their key and field name, so a record written by any
// worker can be checked for consistency even without knowing its version.
func stressValue(key, field string, version int) []byte {
	return fmt.Appendf(nil, "%s|%s|%d", key, field, version)
}

func selfConsistent(key string, rec Record) error {
	for f, v := range rec {
		if !bytes.HasPrefix(v, []byte(key+"|"+f+"|")) {
			return fmt.Errorf("record %s field %s holds foreign value %q", key, f, v)
		}
	}
	return nil
}

type stressWorker struct {
	id      int
	s       *Store
	rng     *rand.Rand
	model   map[string]Record
	version int
	report  func(format string, args ...any)
}

func (w *stressWorker) ownKey() string { return stressKey(w.id, w.rng.IntN(stressKeys)) }

func (w *stressWorker) newFields(key string, all bool) Record {
	w.version++
	r := Record{}
	n := stressFields
	if !all {
		n = 1 + w.rng.IntN(3)
	}
	for i := 0; i < n; i++ {
		f := fmt.Sprintf("f%d", w.rng.IntN(stressFields))
		if all {
			f = fmt.Sprintf("f%d", i)
		}
		r[f] = stressValue(key, f, w.version)
	}
	return r
}

func (w *stressWorker) merge(key string, fields Record) {
	base := maps.Clone(w.model[key])
	if base == nil {
		base = Record{}
	}
	maps.Copy(base, fields)
	w.model[key] = base
}

func (w *stressWorker) checkOwn(key string, got Record, err error, fields []string) {
	want, ok := w.model[key]
	if !ok {
		if !errors.Is(err, ErrNotFound) {
			w.report("get %s: want ErrNotFound, got %v %v", key, got, err)
		}
		return
	}
	if err != nil {
		w.report("get %s: %v", key, err)
		return
	}
	if len(fields) > 0 {
		sub := Record{}
		for _, f := range fields {
			if v, ok := want[f]; ok {
				sub[f] = v
			}
		}
		want = sub
	}
	if !recordsEqual(want, got) {
		w.report("get %s: want %v, got %v", key, want, got)
	}
}

func recordsEqual(a, b Record) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}

func (w *stressWorker) step(ctx context.Context) {
	switch op := w.rng.IntN(100); {
	case op < 30:
		key := w.ownKey()
		var fields []string
		if w.rng.IntN(2) == 0 {
			fields = []string{fmt.Sprintf("f%d", w.rng.IntN(stressFields))}
		}
		got, err := w.s.Get(ctx, key, fields...)
		w.checkOwn(key, got, err, fields)
	case op < 50:
		key := w.ownKey()
		f := w.newFields(key, false)
		if err := w.s.Put(ctx, key, f); err != nil {
			w.report("put %s: %v", key, err)
			return
		}
		w.merge(key, f)
	case op < 58:
		key := w.ownKey()
		f := w.newFields(key, true)
		if err := w.s.Insert(ctx, key, f); err != nil {
			w.report("insert %s: %v", key, err)
			return
		}
		w.model[key] = f
	case op < 66:
		key := w.ownKey()
		err := w.s.Delete(ctx, key)
		_, had := w.model[key]
		if had && err != nil || !had && !errors.Is(err, ErrNotFound) {
			w.report("delete %s (present=%v): %v", key, had, err)
		}
		delete(w.model, key)
	case op < 76:
		kvs := make([]KV, 2+w.rng.IntN(3))
		for i := range kvs {
			kvs[i].Key = w.ownKey()
			kvs[i].Record = w.newFields(kvs[i].Key, false)
		}
		if err := w.s.MultiPut(ctx, kvs); err != nil {
			w.report("multiput: %v", err)
			return
		}
		for _, kv := range kvs {
			w.merge(kv.Key, kv.Record)
		}
	case op < 88:
		keys := make([]string, 1+w.rng.IntN(10))
		for i := range keys {
			if i%2 == 0 {
				keys[i] = w.ownKey()
			} else {
				keys[i] = stressKey(w.rng.IntN(stressWorkers), w.rng.IntN(stressKeys))
			}
		}
		recs, err := w.s.MultiGet(ctx, keys)
		if err != nil || len(recs) != len(keys) {
			w.report("multiget: %d/%d %v", len(recs), len(keys), err)
			return
		}
		for i, k := range keys {
			if owner(k) == w.id {
				var gerr error
				if recs[i] == nil {
					gerr = ErrNotFound
				}
				w.checkOwn(k, recs[i], gerr, nil)
			} else if err := selfConsistent(k, recs[i]); err != nil {
				w.report("multiget: %v", err)
			}
		}
	default:
		start := stressKey(w.rng.IntN(stressWorkers), w.rng.IntN(stressKeys))
		count := 1 + w.rng.IntN(50)
		kvs, err := w.s.Scan(ctx, start, count)
		if err != nil || len(kvs) > count {
			w.report("scan %s/%d: %d results, %v", start, count, len(kvs), err)
			return
		}
		for i, kv := range kvs {
			if kv.Key < start || i > 0 && kv.Key <= kvs[i-1].Key {
				w.report("scan %s: out of order key %s", start, kv.Key)
			}
			if err := selfConsistent(kv.Key, kv.Record); err != nil {
				w.report("scan: %v", err)
			}
		}
		if len(kvs) == 0 {
			return
		}
		// Own keys inside the scanned range are stable during the scan (only
		// this worker writes them), so they must match the model exactly.
		last := kvs[len(kvs)-1].Key
		got := map[string]Record{}
		for _, kv := range kvs {
			got[kv.Key] = kv.Record
		}
		for i := 0; i < stressKeys; i++ {
			k := stressKey(w.id, i)
			if k < start || k > last {
				continue
			}
			want, ok := w.model[k]
			rec, found := got[k]
			if ok != found || ok && !recordsEqual(want, rec) {
				w.report("scan %s..%s: own key %s model=%v got=%v", start, last, k, want, rec)
			}
		}
	}
}

func TestConcurrentModel(t *testing.T) {
	d := stressDuration(t)
	for _, mode := range commitModes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			s := openTest(t, append(mode.opts, WithConcurrency(16))...)
			ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
			defer cancel()
			var mismatches, ops atomic.Int64
			var mu sync.Mutex
			var samples []string
			report := func(format string, args ...any) {
				mismatches.Add(1)
				mu.Lock()
				if len(samples) < 10 {
					samples = append(samples, fmt.Sprintf(format, args...))
				}
				mu.Unlock()
			}
			stop := time.Now().Add(d)
			var wg sync.WaitGroup
			workers := make([]*stressWorker, stressWorkers)
			for i := range workers {
				workers[i] = &stressWorker{id: i, s: s, rng: rand.New(rand.NewPCG(uint64(i), 42)), model: map[string]Record{}, report: report}
				wg.Add(1)
				go func(w *stressWorker) {
					defer wg.Done()
					for n := 0; ; n++ {
						if n%16 == 0 && time.Now().After(stop) {
							return
						}
						w.step(ctx)
						ops.Add(1)
					}
				}(workers[i])
			}
			wg.Wait()

			// Final check: the whole store equals the union of the models.
			want := map[string]Record{}
			for _, w := range workers {
				maps.Copy(want, w.model)
			}
			all, err := s.Scan(ctx, "", stressWorkers*stressKeys)
			require.NoError(t, err)
			keys := make([]string, 0, len(all))
			for _, kv := range all {
				keys = append(keys, kv.Key)
				if !recordsEqual(want[kv.Key], kv.Record) {
					report("final %s: want %v got %v", kv.Key, want[kv.Key], kv.Record)
				}
			}
			require.True(t, sort.StringsAreSorted(keys))
			require.Len(t, all, len(want))
			t.Logf("%s: %d ops in %v by %d goroutines, %d mismatches", mode.name, ops.Load(), d, stressWorkers, mismatches.Load())
			require.Zero(t, mismatches.Load(), "samples: %v", samples)
		})
	}
}
