package dist

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/tpch/duck"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// rowsOf reads a cursor whole as text.
func rowsOf(t *testing.T, cur hs2.Cursor) [][]string {
	t.Helper()
	defer func() { require.NoError(t, cur.Close()) }()
	cols, err := cur.ColumnTypes()
	require.NoError(t, err)
	var out [][]string
	for cur.Next() {
		v := make([]any, len(cols))
		p := make([]any, len(cols))
		for i := range v {
			p[i] = &v[i]
		}
		require.NoError(t, cur.Scan(p...))
		row := make([]string, len(v))
		for i := range v {
			row[i] = fmt.Sprint(v[i])
		}
		out = append(out, row)
	}
	require.NoError(t, cur.Err())
	return out
}

// TestShuffle runs Q17 and Q20, whose plans repartition lineitem rows by
// partkey between the workers, on two workers in process in Apache's and
// HatRPC's exchange: the answers are the single-process run's, rows
// moved between the workers, and no fragment stays open.
func TestShuffle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full, err := duck.Open(ctx, 0.01)
	require.NoError(t, err)
	defer func() { assert.NoError(t, full.Close()) }()
	texts, err := duck.Queries(ctx, full)
	require.NoError(t, err)
	coordDB, err := duck.Open(ctx, 0.01)
	require.NoError(t, err)
	defer func() { assert.NoError(t, coordDB.Close()) }()
	require.NoError(t, PrepareCoordinator(ctx, coordDB))
	var ws [2]*Worker
	for i := range ws {
		ws[i], err = OpenWorker(ctx, 0.01, i, 2)
		require.NoError(t, err)
		defer func() { assert.NoError(t, ws[i].Close()) }()
	}
	want := map[int][][]string{}
	for _, q := range []int{17, 20} {
		rows, err := hs2.DB{DB: full}.Query(ctx, texts[q])
		require.NoError(t, err)
		want[q] = rowsOf(t, rows)
		require.NotEmpty(t, want[q])
	}
	// No part is Brand#23 in a MED BOX at SF 0.01 (Q17's answer is NULL):
	// a wider Q17, whose shuffle moves rows, is checked too.
	wide := func(q string) string { return strings.ReplaceAll(q, "p_brand = 'Brand#23'", "p_brand LIKE 'Brand#2%'") }
	rows, err := hs2.DB{DB: full}.Query(ctx, wide(texts[17]))
	require.NoError(t, err)
	want[117] = rowsOf(t, rows)
	require.NotEqual(t, [][]string{{"<nil>"}}, want[117])
	for _, cfg := range []Config{Vanilla, Function} {
		t.Run(cfg.String(), func(t *testing.T) {
			var addrs []string
			for _, w := range ws {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				defer Serve(w, ln, cfg, "off")(context.Background()) //nolint:errcheck
				addrs = append(addrs, ln.Addr().String())
			}
			coord, err := NewCoordinator(ctx, coordDB, addrs, cfg, "off")
			require.NoError(t, err)
			defer func() { assert.NoError(t, coord.Close()) }()
			q17 := *coord.PlanFor(texts[17])
			q17.Fragments = []Fragment{q17.Fragments[0]}
			in := q17.Fragments[0].Inputs[0]
			q17.Fragments[0].Inputs = []Input{{Table: "li", Key: in.Key, SQL: wide(in.SQL)}}
			for _, q := range []int{17, 20, 117} {
				plan, text := coord.PlanFor(texts[q%100]), texts[q%100]
				require.Equal(t, "shuffle", plan.Kind)
				if q == 117 {
					plan, text = &q17, wide(text)
				}
				before := coord.Stats()
				cur, err := coord.QueryPlan(ctx, plan, text)
				require.NoError(t, err, "Q%d", q)
				assert.Equal(t, want[q], rowsOf(t, cur), "Q%d", q)
				after := coord.Stats()
				if q != 17 {
					assert.Positive(t, after.Shuffled-before.Shuffled, "Q%d", q)
					assert.Greater(t, after.Bytes-before.Bytes, after.Shuffled-before.Shuffled, "Q%d: the partial results came too", q)
				}
				for _, w := range ws {
					assert.Zero(t, w.Open(), "Q%d", q)
					w.mu.Lock()
					assert.Empty(t, w.spools, "Q%d: every spool dropped", q)
					w.mu.Unlock()
					var n int
					require.NoError(t, w.db.QueryRowContext(ctx, "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'tpch_spool_%'").Scan(&n))
					assert.Zero(t, n, "Q%d: no spool table left", q)
				}
			}
		})
	}
}
