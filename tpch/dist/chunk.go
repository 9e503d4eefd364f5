package dist

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hatrpc/hatrpc/tpch/duck"
	eb "github.com/hatrpc/hatrpc/tpch/gen/exchangebase"
)

// kindOf is how a column of DuckDB type dbType travels (exchange_base.thrift's
// Kind): integers up to BIGINT as i64, FLOAT/DOUBLE as double, BOOLEAN as
// bool, the rest as exact text that the coordinator casts back to dbType.
func kindOf(dbType string) eb.Kind {
	switch strings.ToUpper(dbType) {
	case "BOOLEAN":
		return eb.Kind_BOOL
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER":
		return eb.Kind_I64
	case "FLOAT", "DOUBLE":
		return eb.Kind_F64
	default:
		return eb.Kind_STR
	}
}

// stageType is the column type a chunk of kind k is appended to.
func stageType(k eb.Kind) string {
	switch k {
	case eb.Kind_BOOL:
		return "BOOLEAN"
	case eb.Kind_I64:
		return "BIGINT"
	case eb.Kind_F64:
		return "DOUBLE"
	default:
		return "VARCHAR"
	}
}

// metaOf describes a worker's result columns.
func metaOf(rows *sql.Rows) ([]*eb.ColumnMeta, error) {
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	out := make([]*eb.ColumnMeta, len(cts))
	for i, ct := range cts {
		t := ct.DatabaseTypeName()
		out[i] = &eb.ColumnMeta{Name: ct.Name(), DbType: t, Kind: kindOf(t)}
	}
	return out, nil
}

// chunkBuilder collects rows of a result into one Chunk, counting the
// bytes the values take on the wire (Thrift binary: 8 per number, 1 per
// bool, 4 plus the length per string, and the NULL bitmaps).
type chunkBuilder struct {
	meta  []*eb.ColumnMeta
	cols  []*eb.Column
	rows  int
	bytes int
}

func newChunkBuilder(meta []*eb.ColumnMeta) *chunkBuilder {
	b := &chunkBuilder{meta: meta, cols: make([]*eb.Column, len(meta))}
	for i := range b.cols {
		b.cols[i] = &eb.Column{Nulls: []byte{}}
		switch meta[i].Kind {
		case eb.Kind_I64:
			b.cols[i].I64s = []int64{}
		case eb.Kind_F64:
			b.cols[i].F64s = []float64{}
		case eb.Kind_BOOL:
			b.cols[i].Bools = []bool{}
		default:
			b.cols[i].Strs = []string{}
		}
	}
	return b
}

// add appends one row of values as database/sql scanned them into `any`.
func (b *chunkBuilder) add(vals []any) error {
	r := b.rows
	for i, v := range vals {
		c := b.cols[i]
		if r%8 == 0 {
			c.Nulls = append(c.Nulls, 0)
			b.bytes++
		}
		if v == nil {
			c.Nulls[r/8] |= 1 << (r % 8)
		}
		switch b.meta[i].Kind {
		case eb.Kind_I64:
			x, err := duck.Int64(v)
			if err != nil {
				return fmt.Errorf("column %s: %w", b.meta[i].Name, err)
			}
			c.I64s = append(c.I64s, x)
			b.bytes += 8
		case eb.Kind_F64:
			x, err := duck.Float64(v)
			if err != nil {
				return fmt.Errorf("column %s: %w", b.meta[i].Name, err)
			}
			c.F64s = append(c.F64s, x)
			b.bytes += 8
		case eb.Kind_BOOL:
			x, _ := v.(bool)
			c.Bools = append(c.Bools, x)
			b.bytes++
		default:
			s := textOf(v, b.meta[i].DbType)
			c.Strs = append(c.Strs, s)
			b.bytes += 4 + len(s)
		}
	}
	b.rows++
	return nil
}

func (b *chunkBuilder) chunk(last bool) *eb.Chunk {
	return &eb.Chunk{Rows: int32(b.rows), Columns: b.cols, Last: last}
}

// textOf is v as DuckDB reads it back with CAST(text AS dbType).
func textOf(v any, dbType string) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		if strings.EqualFold(dbType, "DATE") {
			return x.Format(time.DateOnly)
		}
		return x.Format("2006-01-02 15:04:05.999999999")
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

// ChunkBytes is what a chunk's values take on the wire, as chunkBuilder
// counts them.
func ChunkBytes(c *eb.Chunk) int64 {
	var n int64
	for _, col := range c.Columns {
		n += int64(len(col.Nulls)) + 8*int64(len(col.I64s)+len(col.F64s)) + int64(len(col.Bools))
		for _, s := range col.Strs {
			n += 4 + int64(len(s))
		}
	}
	return n
}

var dbTypeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_ ]*(\([0-9, ]+\))?$`)

// checkMeta says whether a worker's columns are well-formed (their types
// are spelled into the coordinator's CAST) and, when want is set, the
// same as another worker's.
func checkMeta(got, want []*eb.ColumnMeta) error {
	for i, m := range got {
		if m == nil || !dbTypeRE.MatchString(m.DbType) || kindOf(m.DbType) != m.Kind {
			return fmt.Errorf("column %d: bad description %v", i, m)
		}
	}
	if want == nil {
		return nil
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d columns, another worker sent %d", len(got), len(want))
	}
	for i := range got {
		if *got[i] != *want[i] {
			return fmt.Errorf("column %d is %v, another worker's is %v", i, got[i], want[i])
		}
	}
	return nil
}

// checkChunk says whether c fits meta: one column per meta column, each
// with the list of its kind holding c.Rows values and a bitmap that
// covers them. A chunk from the wire is checked before it is appended.
func checkChunk(c *eb.Chunk, meta []*eb.ColumnMeta) error {
	if len(c.Columns) != len(meta) {
		return fmt.Errorf("chunk of %d columns, want %d", len(c.Columns), len(meta))
	}
	if c.Rows < 0 {
		return fmt.Errorf("chunk of %d rows", c.Rows)
	}
	n := int(c.Rows)
	for i, col := range c.Columns {
		if col == nil {
			return fmt.Errorf("column %s missing", meta[i].Name)
		}
		var got int
		switch meta[i].Kind {
		case eb.Kind_I64:
			got = len(col.I64s)
		case eb.Kind_F64:
			got = len(col.F64s)
		case eb.Kind_BOOL:
			got = len(col.Bools)
		case eb.Kind_STR:
			got = len(col.Strs)
		default:
			return fmt.Errorf("column %s: unknown kind %d", meta[i].Name, meta[i].Kind)
		}
		if got != n {
			return fmt.Errorf("column %s has %d values, want %d", meta[i].Name, got, n)
		}
		if len(col.Nulls) != 0 && len(col.Nulls) < (n+7)/8 {
			return fmt.Errorf("column %s: NULL bitmap of %d bytes for %d rows", meta[i].Name, len(col.Nulls), n)
		}
	}
	return nil
}

// appendChunk appends c's rows (checked against meta) with app, one row
// of driver values at a time.
func appendChunk(app interface{ AppendRow(...driver.Value) error }, c *eb.Chunk, meta []*eb.ColumnMeta) error {
	if err := checkChunk(c, meta); err != nil {
		return err
	}
	row := make([]driver.Value, len(meta))
	for r := 0; r < int(c.Rows); r++ {
		for i, col := range c.Columns {
			if r/8 < len(col.Nulls) && col.Nulls[r/8]&(1<<(r%8)) != 0 {
				row[i] = nil
				continue
			}
			switch meta[i].Kind {
			case eb.Kind_I64:
				row[i] = col.I64s[r]
			case eb.Kind_F64:
				row[i] = col.F64s[r]
			case eb.Kind_BOOL:
				row[i] = col.Bools[r]
			default:
				row[i] = col.Strs[r]
			}
		}
		if err := app.AppendRow(row...); err != nil {
			return err
		}
	}
	return nil
}
