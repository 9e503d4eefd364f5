package emul

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// model is what the store should hold.
type model map[string]map[string][]byte

func (m model) merge(key string, vals map[string][]byte) {
	if m[key] == nil {
		m[key] = map[string][]byte{}
	}
	for f, v := range vals {
		m[key][f] = bytes.Clone(v)
	}
}

func record(key string, gen, fields, size int) map[string][]byte {
	r := make(map[string][]byte, fields)
	for i := range fields {
		r[fmt.Sprintf("field%d", i)] = bytes.Repeat([]byte(fmt.Sprintf("%s/%d/%d|", key, gen, i)), size/8+1)[:size]
	}
	return r
}

func project(r map[string][]byte, fields []string) map[string][]byte {
	if fields == nil {
		return r
	}
	out := map[string][]byte{}
	for _, f := range fields {
		if v, ok := r[f]; ok {
			out[f] = v
		}
	}
	return out
}

var pollings = []rdma.Polling{rdma.PollBusy, rdma.PollEvent}

// TestRoundTrip runs every YCSB operation of every emulation against a
// model: small records (eager everywhere) and 6 KiB ones (AR-gRPC's
// Read-RNDV, HERD's and Hybrid's rendezvous fallback, RFP's rest READ).
func TestRoundTrip(t *testing.T) {
	for _, kind := range Kinds() {
		for _, poll := range pollings {
			t.Run(fmt.Sprintf("%v/%v", kind, poll), func(t *testing.T) {
				e := newEnv(t)
				c := e.dial(t, kind, WithPolling(poll))
				// A budget per call, not one for the whole sequence of ~150
				// calls: a loaded or paused host slows every call, and only
				// a call that hangs should fail (it then fails where it hangs).
				cx := func() context.Context { return testCtx(t, testTimeout) }
				m := model{}
				keys := make([]string, 40)
				for i := range keys {
					keys[i] = fmt.Sprintf("user%020d", i)
					size := 100
					if i%4 == 3 {
						size = 600 // 10 fields: a ~6 KiB record
					}
					rec := record(keys[i], 0, 10, size)
					require.NoError(t, c.Insert(cx(), keys[i], rec))
					m.merge(keys[i], rec)
				}
				for i, k := range keys {
					if i%3 == 0 {
						upd := map[string][]byte{"field1": []byte(fmt.Sprintf("updated-%d", i))}
						require.NoError(t, c.Update(cx(), k, upd))
						m.merge(k, upd)
					}
				}
				batch := keys[5:15]
				vals := make([]map[string][]byte, len(batch))
				for i, k := range batch {
					vals[i] = record(k, 1, 3, 50)
					m.merge(k, vals[i])
				}
				require.NoError(t, c.MultiUpdate(cx(), batch, vals))

				for _, fields := range [][]string{nil, {"field1", "field2"}} {
					for _, k := range keys {
						got, err := c.Read(cx(), k, fields)
						require.NoError(t, err, k)
						require.Equal(t, project(m[k], fields), got, k)
					}
					got, err := c.MultiRead(cx(), keys[:10], fields)
					require.NoError(t, err)
					for i, k := range keys[:10] {
						require.Equal(t, project(m[k], fields), got[i], k)
					}
				}
				sorted := slices.Sorted(maps.Keys(m))
				sc, err := c.Scan(cx(), sorted[3], 7, nil)
				require.NoError(t, err)
				require.Len(t, sc, 7)
				for i, r := range sc {
					require.Equal(t, m[sorted[3+i]], r)
				}

				_, err = c.Read(cx(), "user-missing", nil)
				require.ErrorIs(t, err, ErrNotFound)
				_, err = c.MultiRead(cx(), []string{keys[0], "user-missing"}, nil)
				require.ErrorIs(t, err, ErrNotFound)
				require.NoError(t, c.Delete(cx(), keys[0]))
				_, err = c.Read(cx(), keys[0], nil)
				require.ErrorIs(t, err, ErrNotFound)
				require.ErrorIs(t, c.Update(cx(), "", map[string][]byte{"f": nil}), ErrInvalid)

				if kind == Pilaf {
					st := c.PilafStats()
					// Every hit was three READs; the three misses (two absent
					// keys, one deleted) one bucket READ each, then an RPC.
					assert.Equal(t, uint64(3), st.Fallbacks, "%+v", st)
					assert.Equal(t, 3*(st.Gets-3)+3, st.Reads, "%+v", st)
					assert.Zero(t, st.Retries)
				}
				// The store itself agrees with the model.
				for _, k := range keys[1:] {
					got, err := e.store.Get(cx(), k)
					require.NoError(t, err)
					require.Equal(t, m[k], map[string][]byte(got))
				}
			})
		}
	}
}

func TestParseKindAndHello(t *testing.T) {
	for _, k := range Kinds() {
		got, err := ParseKind(k.String())
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
	_, err := ParseKind("grpc")
	require.ErrorIs(t, err, ErrUnknownKind)

	e := newEnv(t)
	nc, err := e.conn(nil)
	require.NoError(t, err)
	_, err = Dial(testCtx(t, testTimeout), e.dev, nc, Kind(9))
	require.ErrorIs(t, err, ErrUnknownKind)
	<-e.errs // the server saw EOF before a hello: a bad hello
	e.live--

	// A hello naming no emulation is refused by the server.
	nc, err = e.conn(nil)
	require.NoError(t, err)
	err = writeHello(testCtx(t, testTimeout), nc, hello{kind: 9})
	require.ErrorIs(t, err, ErrRefused)
	require.NoError(t, nc.Close())
	require.ErrorIs(t, <-e.errs, ErrUnknownKind)
	e.live--
}
