package dist

import (
	"context"
	"database/sql/driver"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	eb "github.com/hatrpc/hatrpc/tpch/gen/exchangebase"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// rowsApp collects appended rows.
type rowsApp struct{ rows [][]driver.Value }

func (a *rowsApp) AppendRow(v ...driver.Value) error {
	a.rows = append(a.rows, append([]driver.Value(nil), v...))
	return nil
}

func TestChunkRoundTrip(t *testing.T) {
	meta := []*eb.ColumnMeta{
		{Name: "i", DbType: "INTEGER", Kind: eb.Kind_I64},
		{Name: "d", DbType: "DOUBLE", Kind: eb.Kind_F64},
		{Name: "b", DbType: "BOOLEAN", Kind: eb.Kind_BOOL},
		{Name: "s", DbType: "DECIMAL(15,2)", Kind: eb.Kind_STR},
		{Name: "t", DbType: "DATE", Kind: eb.Kind_STR},
	}
	day := time.Date(1995, 3, 15, 0, 0, 0, 0, time.UTC)
	b := newChunkBuilder(meta)
	for r := range 10 {
		vals := []any{int32(r), float64(r) / 2, r%2 == 0, fmt.Sprintf("%d.50", r), day}
		if r == 3 {
			vals = []any{nil, nil, nil, nil, nil}
		}
		require.NoError(t, b.add(vals))
	}
	c := b.chunk(true)
	assert.Equal(t, int64(b.bytes), ChunkBytes(c))
	var app rowsApp
	require.NoError(t, appendChunk(&app, c, meta))
	require.Len(t, app.rows, 10)
	assert.Equal(t, []driver.Value{int64(2), 1.0, true, "2.50", "1995-03-15"}, app.rows[2])
	assert.Equal(t, []driver.Value{nil, nil, nil, nil, nil}, app.rows[3])
}

func TestCheckChunk(t *testing.T) {
	meta := []*eb.ColumnMeta{{Name: "i", DbType: "BIGINT", Kind: eb.Kind_I64}}
	cases := []struct {
		name string
		c    *eb.Chunk
		want string
	}{
		{"columns", &eb.Chunk{Rows: 1}, "chunk of 0 columns, want 1"},
		{"negative rows", &eb.Chunk{Rows: -1, Columns: []*eb.Column{{}}}, "chunk of -1 rows"},
		{"nil column", &eb.Chunk{Rows: 0, Columns: []*eb.Column{nil}}, "column i missing"},
		{"values", &eb.Chunk{Rows: 2, Columns: []*eb.Column{{I64s: []int64{1}}}}, "column i has 1 values, want 2"},
		{"bitmap", &eb.Chunk{Rows: 9, Columns: []*eb.Column{{I64s: make([]int64, 9), Nulls: []byte{0}}}},
			"column i: NULL bitmap of 1 bytes for 9 rows"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.EqualError(t, checkChunk(tc.c, meta), tc.want)
		})
	}
	assert.EqualError(t, checkChunk(&eb.Chunk{Rows: 0, Columns: []*eb.Column{{}}},
		[]*eb.ColumnMeta{{Name: "x", Kind: 9}}), "column x: unknown kind 9")
}

func TestCheckMeta(t *testing.T) {
	ok := []*eb.ColumnMeta{{Name: "a", DbType: "DECIMAL(38,2)", Kind: eb.Kind_STR}}
	require.NoError(t, checkMeta(ok, nil))
	require.NoError(t, checkMeta(ok, ok))
	assert.ErrorContains(t, checkMeta([]*eb.ColumnMeta{{Name: "a", DbType: "INT); DROP TABLE x; --", Kind: eb.Kind_STR}}, nil), "bad description")
	assert.ErrorContains(t, checkMeta([]*eb.ColumnMeta{{Name: "a", DbType: "BIGINT", Kind: eb.Kind_STR}}, nil), "bad description")
	assert.EqualError(t, checkMeta(ok, append(ok, ok[0])), "1 columns, another worker sent 2")
}

// FuzzAppendChunk: a chunk from the wire either fails its check or
// appends exactly its rows.
func FuzzAppendChunk(f *testing.F) {
	f.Add(int32(2), 2, 1, []byte{2}, uint8(0))
	f.Add(int32(9), 9, 9, []byte{}, uint8(3))
	f.Fuzz(func(t *testing.T, rows int32, n, m int, nulls []byte, kind uint8) {
		if n < 0 || n > 64 || m < 0 || m > 64 {
			return
		}
		meta := []*eb.ColumnMeta{{Name: "a", DbType: "BIGINT", Kind: eb.Kind(kind%5 + 0)}, {Name: "b", DbType: "VARCHAR", Kind: eb.Kind_STR}}
		c := &eb.Chunk{Rows: rows, Columns: []*eb.Column{
			{I64s: make([]int64, n), F64s: make([]float64, n), Bools: make([]bool, n), Strs: make([]string, n), Nulls: nulls},
			{Strs: make([]string, m)},
		}}
		var app rowsApp
		if err := appendChunk(&app, c, meta); err == nil {
			require.Len(t, app.rows, int(rows))
		}
	})
}

func TestNormalizeAndFallback(t *testing.T) {
	assert.Equal(t, "SELECT 1 FROM x", normalize("  SELECT\n\t1\nFROM   x ;\n"))
	p := fallbackPlan("SELECT count(*) FROM LineItem l JOIN orders o ON l_orderkey = o_orderkey, lineitem")
	assert.Equal(t, "fallback", p.Kind)
	assert.Equal(t, []Fragment{{Table: "lineitem", SQL: "SELECT * FROM lineitem"}, {Table: "orders", SQL: "SELECT * FROM orders"}}, p.Fragments)
	assert.Equal(t, "local", fallbackPlan("SELECT * FROM nation").Kind)
	_, err := stripOrder("SELECT 1")
	assert.EqualError(t, err, `dist: no ORDER BY in "SELECT 1"`)
}

func TestParseConfig(t *testing.T) {
	for _, c := range []Config{Vanilla, Service, Function} {
		got, err := ParseConfig(c.String())
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	// The bench and the front end convert hs2's configurations to these.
	for _, c := range []hs2.Config{hs2.Vanilla, hs2.Service, hs2.Function} {
		assert.Equal(t, c.String(), Config(c).String())
	}
	_, err := ParseConfig("fast")
	assert.EqualError(t, err, `dist: unknown configuration "fast": want vanilla, service or function`)
}

// TestWorker calls a worker in process: its partition, paging by
// maxBytes, a SQL error, unknown handles, Cancel of a running fragment.
func TestWorker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := OpenWorker(ctx, 0.01, 1, 3)
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()

	info, err := w.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, int32(1), info.Index)
	assert.Positive(t, info.LineitemRows)
	var bad int64
	require.NoError(t, w.db.QueryRowContext(ctx, "SELECT count(*) FROM lineitem WHERE l_orderkey % 3 <> 1").Scan(&bad))
	assert.Zero(t, bad)

	r, err := w.OpenFragment(ctx, &eb.OpenReq{Sql: "SELECT l_orderkey, l_extendedprice, l_shipdate FROM lineitem", Tag: "t1"})
	require.NoError(t, err)
	assert.Equal(t, []*eb.ColumnMeta{{Name: "l_orderkey", DbType: "BIGINT", Kind: eb.Kind_I64},
		{Name: "l_extendedprice", DbType: "DECIMAL(15,2)", Kind: eb.Kind_STR}, {Name: "l_shipdate", DbType: "DATE", Kind: eb.Kind_STR}}, r.Columns)
	var rows int64
	chunks := 0
	for {
		c, err := w.FetchChunk(ctx, &eb.FetchReq{Handle: r.Handle, MaxBytes: 64 << 10})
		require.NoError(t, err)
		require.NoError(t, checkChunk(c, r.Columns))
		assert.LessOrEqual(t, ChunkBytes(c), int64(64<<10+64), "a chunk stops once it holds maxBytes")
		rows += int64(c.Rows)
		chunks++
		if c.Last {
			break
		}
	}
	assert.Equal(t, info.LineitemRows, rows)
	assert.Greater(t, chunks, 3)
	assert.Zero(t, w.Open(), "the last chunk closes the fragment")
	_, err = w.FetchChunk(ctx, &eb.FetchReq{Handle: r.Handle, MaxBytes: 1})
	assert.EqualError(t, err, fmt.Sprintf("FragmentError({Message:worker 1: no open fragment %d})", r.Handle))

	_, err = w.OpenFragment(ctx, &eb.OpenReq{Sql: "SELECT nope FROM lineitem", Tag: "t2"})
	require.True(t, IsFragmentError(err), "%v", err)
	assert.Contains(t, err.Error(), "worker 1: Binder Error")
	assert.Zero(t, w.Open())

	// A fragment that would run for hours, cancelled by its tag while it
	// opens.
	errc := make(chan error, 1)
	go func() {
		_, err := w.OpenFragment(ctx, &eb.OpenReq{Sql: "SELECT count(*) FROM range(1000000000000) t(x) WHERE x % 7 = 3", Tag: "slow"})
		errc <- err
	}()
	for w.Open() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, w.Cancel(ctx, "slow"))
	select {
	case err := <-errc:
		require.True(t, IsFragmentError(err), "%v", err)
	case <-ctx.Done():
		t.Fatal("Cancel did not stop the fragment")
	}
	assert.Zero(t, w.Open())
	require.NoError(t, w.CloseFragment(ctx, 12345), "closing an unknown handle is a no-op")

	// A Cancel that overtook its query's OpenFragment: the fragment that
	// comes after it does not run.
	require.NoError(t, w.Cancel(ctx, "early"))
	_, err = w.OpenFragment(ctx, &eb.OpenReq{Sql: "SELECT 1", Tag: "early"})
	assert.EqualError(t, err, "FragmentError({Message:worker 1: query early was cancelled})")
	assert.Zero(t, w.Open())

	// A fragment nobody fetches (its coordinator went away) is dropped
	// once idle for FragmentIdle, not before.
	_, err = w.OpenFragment(ctx, &eb.OpenReq{Sql: "SELECT 1", Tag: "orphan"})
	require.NoError(t, err)
	w.expire(time.Now())
	assert.Equal(t, 1, w.Open())
	w.expire(time.Now().Add(FragmentIdle))
	assert.Zero(t, w.Open())
}
