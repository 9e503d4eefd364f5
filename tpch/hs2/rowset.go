package hs2

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hatrpc/hatrpc/tpch/duck"
	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

// kind is how one result column travels in a columnar TRowSet.
type kind int

const (
	kindBool kind = iota
	kindByte
	kindI16
	kindI32
	kindI64
	kindDouble
	kindString
	kindBinary
)

// colType is a result column's HiveServer2 type and wire form.
type colType struct {
	name      string
	id        tcli.TTypeId
	kind      kind
	precision int32 // DECIMAL only
	scale     int32
	date      bool // DATE (formatted without a time)
}

var decimalRE = regexp.MustCompile(`^DECIMAL\((\d+),\s*(\d+)\)$`)

// typeOf maps the engine's type name (DuckDB's spelling) to HiveServer2's.
// Types HiveServer2 has no column for travel as strings, as Hive sends
// its own complex types.
func typeOf(name, dbType string) colType {
	t := colType{name: name}
	u := strings.ToUpper(dbType)
	switch {
	case u == "BOOLEAN":
		t.id, t.kind = tcli.TTypeId_BOOLEAN_TYPE, kindBool
	case u == "TINYINT":
		t.id, t.kind = tcli.TTypeId_TINYINT_TYPE, kindByte
	case u == "SMALLINT" || u == "UTINYINT":
		t.id, t.kind = tcli.TTypeId_SMALLINT_TYPE, kindI16
	case u == "INTEGER" || u == "USMALLINT":
		t.id, t.kind = tcli.TTypeId_INT_TYPE, kindI32
	case u == "BIGINT" || u == "UINTEGER":
		t.id, t.kind = tcli.TTypeId_BIGINT_TYPE, kindI64
	case u == "FLOAT":
		t.id, t.kind = tcli.TTypeId_FLOAT_TYPE, kindDouble
	case u == "DOUBLE":
		t.id, t.kind = tcli.TTypeId_DOUBLE_TYPE, kindDouble
	case u == "HUGEINT" || u == "UBIGINT" || u == "UHUGEINT":
		t.id, t.kind, t.precision = tcli.TTypeId_DECIMAL_TYPE, kindString, 38
	case decimalRE.MatchString(u):
		m := decimalRE.FindStringSubmatch(u)
		p, _ := strconv.ParseInt(m[1], 10, 32)
		s, _ := strconv.ParseInt(m[2], 10, 32)
		t.id, t.kind, t.precision, t.scale = tcli.TTypeId_DECIMAL_TYPE, kindString, int32(p), int32(s)
	case u == "DATE":
		t.id, t.kind, t.date = tcli.TTypeId_DATE_TYPE, kindString, true
	case strings.HasPrefix(u, "TIMESTAMP"):
		t.id, t.kind = tcli.TTypeId_TIMESTAMP_TYPE, kindString
	case u == "BLOB":
		t.id, t.kind = tcli.TTypeId_BINARY_TYPE, kindBinary
	default:
		t.id, t.kind = tcli.TTypeId_STRING_TYPE, kindString
	}
	return t
}

func columnTypes(rows Cursor) ([]colType, error) {
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	out := make([]colType, len(cts))
	for i, ct := range cts {
		out[i] = typeOf(ct.Name(), ct.DatabaseTypeName())
	}
	return out, nil
}

func tableSchema(cols []colType) *tcli.TTableSchema {
	s := &tcli.TTableSchema{Columns: make([]*tcli.TColumnDesc, len(cols))}
	for i, c := range cols {
		pe := &tcli.TPrimitiveTypeEntry{Type: c.id}
		if c.id == tcli.TTypeId_DECIMAL_TYPE {
			p, sc := c.precision, c.scale
			pe.TypeQualifiers = &tcli.TTypeQualifiers{Qualifiers: map[string]*tcli.TTypeQualifierValue{
				tcli.PRECISION: {I32Value: &p},
				tcli.SCALE:     {I32Value: &sc},
			}}
		}
		s.Columns[i] = &tcli.TColumnDesc{
			ColumnName: c.name,
			TypeDesc:   &tcli.TTypeDesc{Types: []*tcli.TTypeEntry{{PrimitiveEntry: pe}}},
			Position:   int32(i + 1),
		}
	}
	return s
}

// colBuilder collects one page of one column.
type colBuilder struct {
	t     colType
	n     int
	nulls []byte
	bools []bool
	bytes []int8
	i16s  []int16
	i32s  []int32
	i64s  []int64
	dbls  []float64
	strs  []string
	bins  [][]byte
}

// add appends v (as scanned by database/sql into an `any`) to the column.
func (b *colBuilder) add(v any) error {
	if b.n%8 == 0 {
		b.nulls = append(b.nulls, 0)
	}
	if v == nil {
		b.nulls[b.n/8] |= 1 << (b.n % 8)
	}
	b.n++
	switch b.t.kind {
	case kindBool:
		x, _ := v.(bool)
		b.bools = append(b.bools, x)
	case kindByte, kindI16, kindI32, kindI64:
		x, err := duck.Int64(v)
		if err != nil {
			return fmt.Errorf("column %s: %w", b.t.name, err)
		}
		switch b.t.kind {
		case kindByte:
			b.bytes = append(b.bytes, int8(x))
		case kindI16:
			b.i16s = append(b.i16s, int16(x))
		case kindI32:
			b.i32s = append(b.i32s, int32(x))
		default:
			b.i64s = append(b.i64s, x)
		}
	case kindDouble:
		x, err := duck.Float64(v)
		if err != nil {
			return fmt.Errorf("column %s: %w", b.t.name, err)
		}
		b.dbls = append(b.dbls, x)
	case kindBinary:
		x, _ := v.([]byte)
		b.bins = append(b.bins, x)
	default:
		b.strs = append(b.strs, b.format(v))
	}
	return nil
}

func (b *colBuilder) format(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		if b.t.date {
			return x.Format(time.DateOnly)
		}
		return x.Format("2006-01-02 15:04:05.999999999")
	case fmt.Stringer:
		return b.padScale(x.String())
	default:
		return b.padScale(fmt.Sprint(x))
	}
}

// padScale writes a DECIMAL with all the digits of its scale ("12.50" for
// DECIMAL(10,2)), as Hive does; engines print some without trailing zeros.
func (b *colBuilder) padScale(s string) string {
	if b.t.id != tcli.TTypeId_DECIMAL_TYPE || b.t.scale <= 0 {
		return s
	}
	whole, frac, dot := strings.Cut(s, ".")
	if !dot {
		frac = ""
	}
	if strings.ContainsAny(whole, "eE") || len(frac) >= int(b.t.scale) {
		return s
	}
	return whole + "." + frac + strings.Repeat("0", int(b.t.scale)-len(frac))
}

func (b *colBuilder) column() *tcli.TColumn {
	nulls := b.nulls
	if nulls == nil {
		nulls = []byte{}
	}
	switch b.t.kind {
	case kindBool:
		return &tcli.TColumn{BoolVal: &tcli.TBoolColumn{Values: nonNil(b.bools), Nulls: nulls}}
	case kindByte:
		return &tcli.TColumn{ByteVal: &tcli.TByteColumn{Values: nonNil(b.bytes), Nulls: nulls}}
	case kindI16:
		return &tcli.TColumn{I16Val: &tcli.TI16Column{Values: nonNil(b.i16s), Nulls: nulls}}
	case kindI32:
		return &tcli.TColumn{I32Val: &tcli.TI32Column{Values: nonNil(b.i32s), Nulls: nulls}}
	case kindI64:
		return &tcli.TColumn{I64Val: &tcli.TI64Column{Values: nonNil(b.i64s), Nulls: nulls}}
	case kindDouble:
		return &tcli.TColumn{DoubleVal: &tcli.TDoubleColumn{Values: nonNil(b.dbls), Nulls: nulls}}
	case kindBinary:
		return &tcli.TColumn{BinaryVal: &tcli.TBinaryColumn{Values: nonNil(b.bins), Nulls: nulls}}
	default:
		return &tcli.TColumn{StringVal: &tcli.TStringColumn{Values: nonNil(b.strs), Nulls: nulls}}
	}
}

// nonNil keeps a required list present on the wire even when empty.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
