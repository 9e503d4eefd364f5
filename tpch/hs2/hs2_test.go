package hs2

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/tpch/duck"
	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a Handler over a DuckDB holding table t: one row of every
// type the server maps, and one row of NULLs.
type fixture struct {
	h   *Handler
	ctx context.Context
	sh  *tcli.TSessionHandle
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	db, err := duck.Open(ctx, 0)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE t AS SELECT * FROM (VALUES
		(1::INTEGER, 12.5::DECIMAL(10,2), 'x', true, 0.25::DOUBLE, DATE '1998-09-02',
		 TIMESTAMP '2020-01-02 03:04:05', 'ab'::BLOB, 7::TINYINT, 300::SMALLINT, 9000000000::BIGINT, 170141183460469231731687303715884105727::HUGEINT),
		(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL))
		v(i, d, s, b, f, dt, ts, bl, ti, si, bi, hi)`)
	require.NoError(t, err)
	h := New(db, opts...)
	t.Cleanup(func() {
		h.Close()
		assert.NoError(t, db.Close())
	})
	f := &fixture{h: h, ctx: ctx}
	f.sh = f.open(t)
	return f
}

func (f *fixture) open(t *testing.T) *tcli.TSessionHandle {
	t.Helper()
	r, err := f.h.OpenSession(f.ctx, &tcli.TOpenSessionReq{ClientProtocol: tcli.TProtocolVersion_HIVE_CLI_SERVICE_PROTOCOL_V10})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, r.Status.StatusCode)
	require.Equal(t, tcli.TProtocolVersion_HIVE_CLI_SERVICE_PROTOCOL_V10, r.ServerProtocolVersion)
	return r.SessionHandle
}

func (f *fixture) exec(t *testing.T, sql string, async bool) *tcli.TExecuteStatementResp {
	t.Helper()
	r, err := f.h.ExecuteStatement(f.ctx, &tcli.TExecuteStatementReq{SessionHandle: f.sh, Statement: sql, RunAsync: async})
	require.NoError(t, err)
	return r
}

func (f *fixture) fetch(t *testing.T, op *tcli.TOperationHandle, n int64) *tcli.TFetchResultsResp {
	t.Helper()
	r, err := f.h.FetchResults(f.ctx, &tcli.TFetchResultsReq{OperationHandle: op, MaxRows: n})
	require.NoError(t, err)
	return r
}

func TestTypesAndNulls(t *testing.T) {
	f := newFixture(t)
	ex := f.exec(t, "SELECT * FROM t ORDER BY i NULLS LAST", false)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, ex.Status.StatusCode)
	md, err := f.h.GetResultSetMetadata(f.ctx, &tcli.TGetResultSetMetadataReq{OperationHandle: ex.OperationHandle})
	require.NoError(t, err)
	var ids []tcli.TTypeId
	for _, c := range md.Schema.Columns {
		ids = append(ids, c.TypeDesc.Types[0].PrimitiveEntry.Type)
	}
	assert.Equal(t, []tcli.TTypeId{tcli.TTypeId_INT_TYPE, tcli.TTypeId_DECIMAL_TYPE, tcli.TTypeId_STRING_TYPE,
		tcli.TTypeId_BOOLEAN_TYPE, tcli.TTypeId_DOUBLE_TYPE, tcli.TTypeId_DATE_TYPE, tcli.TTypeId_TIMESTAMP_TYPE,
		tcli.TTypeId_BINARY_TYPE, tcli.TTypeId_TINYINT_TYPE, tcli.TTypeId_SMALLINT_TYPE, tcli.TTypeId_BIGINT_TYPE,
		tcli.TTypeId_DECIMAL_TYPE}, ids)
	q := md.Schema.Columns[1].TypeDesc.Types[0].PrimitiveEntry.TypeQualifiers.Qualifiers
	assert.Equal(t, int32(10), q[tcli.PRECISION].GetI32Value())
	assert.Equal(t, int32(2), q[tcli.SCALE].GetI32Value())

	fr := f.fetch(t, ex.OperationHandle, 100)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, fr.Status.StatusCode)
	assert.False(t, fr.GetHasMoreRows())
	c := fr.Results.Columns
	nulls := []byte{2} // the second row is NULL in every column
	assert.Equal(t, &tcli.TI32Column{Values: []int32{1, 0}, Nulls: nulls}, c[0].I32Val)
	assert.Equal(t, &tcli.TStringColumn{Values: []string{"12.50", ""}, Nulls: nulls}, c[1].StringVal)
	assert.Equal(t, &tcli.TStringColumn{Values: []string{"x", ""}, Nulls: nulls}, c[2].StringVal)
	assert.Equal(t, &tcli.TBoolColumn{Values: []bool{true, false}, Nulls: nulls}, c[3].BoolVal)
	assert.Equal(t, &tcli.TDoubleColumn{Values: []float64{0.25, 0}, Nulls: nulls}, c[4].DoubleVal)
	assert.Equal(t, &tcli.TStringColumn{Values: []string{"1998-09-02", ""}, Nulls: nulls}, c[5].StringVal)
	assert.Equal(t, &tcli.TStringColumn{Values: []string{"2020-01-02 03:04:05", ""}, Nulls: nulls}, c[6].StringVal)
	assert.Equal(t, &tcli.TBinaryColumn{Values: [][]byte{[]byte("ab"), nil}, Nulls: nulls}, c[7].BinaryVal)
	assert.Equal(t, &tcli.TByteColumn{Values: []int8{7, 0}, Nulls: nulls}, c[8].ByteVal)
	assert.Equal(t, &tcli.TI16Column{Values: []int16{300, 0}, Nulls: nulls}, c[9].I16Val)
	assert.Equal(t, &tcli.TI64Column{Values: []int64{9000000000, 0}, Nulls: nulls}, c[10].I64Val)
	assert.Equal(t, &tcli.TStringColumn{Values: []string{"170141183460469231731687303715884105727", ""}, Nulls: nulls}, c[11].StringVal)
}

// TestPaging reads a result maxRows rows at a time, the server capping
// what a client asks for.
func TestPaging(t *testing.T) {
	f := newFixture(t, WithMaxFetchRows(7))
	ex := f.exec(t, "SELECT range AS n FROM range(25)", false)
	var got []int64
	var offsets []int64
	for _, want := range []struct {
		ask  int64
		n    int
		more bool
	}{{10, 7, true}, {5, 5, true}, {0, 7, true}, {100, 6, false}, {10, 0, false}} {
		fr := f.fetch(t, ex.OperationHandle, want.ask)
		require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, fr.Status.StatusCode)
		vals := fr.Results.Columns[0].I64Val.Values
		require.Len(t, vals, want.n)
		require.Equal(t, want.more, fr.GetHasMoreRows())
		offsets = append(offsets, fr.Results.StartRowOffset)
		got = append(got, vals...)
	}
	assert.Equal(t, []int64{0, 7, 12, 19, 25}, offsets)
	for i, v := range got {
		assert.Equal(t, int64(i), v)
	}
	// FETCH_FIRST cannot rewind a forward-only cursor.
	fr, err := f.h.FetchResults(f.ctx, &tcli.TFetchResultsReq{OperationHandle: ex.OperationHandle, Orientation: tcli.TFetchOrientation_FETCH_FIRST, MaxRows: 1})
	require.NoError(t, err)
	assert.Equal(t, tcli.TStatusCode_ERROR_STATUS, fr.Status.StatusCode)
	assert.Equal(t, "0A000", fr.Status.GetSqlState())
	assert.Equal(t, "hs2: not supported: FETCH_FIRST after rows were fetched (the result is a forward-only cursor)", fr.Status.GetErrorMessage())
}

// TestSQLError: a statement the engine refuses is an error status with
// the engine's message, synchronously and asynchronously, and the session
// goes on.
func TestSQLError(t *testing.T) {
	f := newFixture(t)
	ex := f.exec(t, "SELEC 1", false)
	require.Equal(t, tcli.TStatusCode_ERROR_STATUS, ex.Status.StatusCode)
	assert.Equal(t, "42000", ex.Status.GetSqlState())
	assert.Contains(t, ex.Status.GetErrorMessage(), `syntax error at or near "SELEC"`)

	ex = f.exec(t, "SELECT * FROM no_such_table", true)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, ex.Status.StatusCode)
	st := f.waitState(t, ex.OperationHandle)
	require.Equal(t, tcli.TOperationState_ERROR_STATE, st.GetOperationState())
	assert.Equal(t, "42000", st.GetSqlState())
	assert.Contains(t, st.GetErrorMessage(), "no_such_table")

	ex = f.exec(t, "SELECT 42 AS answer", true)
	st = f.waitState(t, ex.OperationHandle)
	require.Equal(t, tcli.TOperationState_FINISHED_STATE, st.GetOperationState())
	assert.True(t, st.GetHasResultSet())
	assert.Equal(t, []int32{42}, f.fetch(t, ex.OperationHandle, 10).Results.Columns[0].I32Val.Values)
}

func (f *fixture) waitState(t *testing.T, op *tcli.TOperationHandle) *tcli.TGetOperationStatusResp {
	t.Helper()
	for {
		st, err := f.h.GetOperationStatus(f.ctx, &tcli.TGetOperationStatusReq{OperationHandle: op})
		require.NoError(t, err)
		require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, st.Status.StatusCode)
		if st.GetOperationState() != tcli.TOperationState_RUNNING_STATE {
			return st
		}
		select {
		case <-f.ctx.Done():
			require.FailNow(t, "operation still running")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestCancel stops a statement that would run for hours.
func TestCancel(t *testing.T) {
	f := newFixture(t)
	ex := f.exec(t, "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b", true)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, ex.Status.StatusCode)
	cr, err := f.h.CancelOperation(f.ctx, &tcli.TCancelOperationReq{OperationHandle: ex.OperationHandle})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, cr.Status.StatusCode)
	st := f.waitState(t, ex.OperationHandle)
	assert.Equal(t, tcli.TOperationState_CANCELED_STATE, st.GetOperationState())
	fr := f.fetch(t, ex.OperationHandle, 1)
	assert.Equal(t, tcli.TStatusCode_ERROR_STATUS, fr.Status.StatusCode)
}

// TestInvalidHandles: unknown, forged and closed handles are refused with
// INVALID_HANDLE_STATUS.
func TestInvalidHandles(t *testing.T) {
	f := newFixture(t)
	ex := f.exec(t, "SELECT 1", false)
	op := ex.OperationHandle
	forged := &tcli.TOperationHandle{OperationId: &tcli.THandleIdentifier{GUID: op.OperationId.GUID, Secret: make([]byte, 16)}}
	unknown := &tcli.TOperationHandle{OperationId: newHandleID()}
	short := &tcli.TOperationHandle{OperationId: &tcli.THandleIdentifier{GUID: []byte{1}, Secret: []byte{2}}}
	for name, h := range map[string]*tcli.TOperationHandle{"forged": forged, "unknown": unknown, "short": short, "nil": nil} {
		fr := f.fetch(t, h, 1)
		assert.Equal(t, tcli.TStatusCode_INVALID_HANDLE_STATUS, fr.Status.StatusCode, name)
	}
	cl, err := f.h.CloseOperation(f.ctx, &tcli.TCloseOperationReq{OperationHandle: op})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, cl.Status.StatusCode)
	fr := f.fetch(t, op, 1)
	assert.Equal(t, tcli.TStatusCode_INVALID_HANDLE_STATUS, fr.Status.StatusCode)
	assert.Equal(t, "hs2: invalid handle: unknown or closed operation", fr.Status.GetErrorMessage())

	// Closing a session closes its operations.
	ex = f.exec(t, "SELECT 1", false)
	cs, err := f.h.CloseSession(f.ctx, &tcli.TCloseSessionReq{SessionHandle: f.sh})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, cs.Status.StatusCode)
	assert.Equal(t, tcli.TStatusCode_INVALID_HANDLE_STATUS, f.fetch(t, ex.OperationHandle, 1).Status.StatusCode)
	ex = f.exec(t, "SELECT 1", false)
	assert.Equal(t, tcli.TStatusCode_INVALID_HANDLE_STATUS, ex.Status.StatusCode)
	assert.Equal(t, "hs2: invalid handle: unknown or closed session", ex.Status.GetErrorMessage())
}

func TestOldProtocolRefused(t *testing.T) {
	f := newFixture(t)
	r, err := f.h.OpenSession(f.ctx, &tcli.TOpenSessionReq{ClientProtocol: tcli.TProtocolVersion_HIVE_CLI_SERVICE_PROTOCOL_V5})
	require.NoError(t, err)
	assert.Equal(t, tcli.TStatusCode_ERROR_STATUS, r.Status.StatusCode)
	assert.Equal(t, "hs2: not supported: client protocol HIVE_CLI_SERVICE_PROTOCOL_V5: row-based result sets (protocol V6 and later send columns)", r.Status.GetErrorMessage())
}

// TestMetadataCalls answers what clients ask on connect.
func TestMetadataCalls(t *testing.T) {
	f := newFixture(t, WithDBMS("DuckDB", "v9"))
	rows := func(st *tcli.TStatus, op *tcli.TOperationHandle) [][]string {
		t.Helper()
		require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, st.StatusCode, st.GetErrorMessage())
		fr := f.fetch(t, op, 1000)
		require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, fr.Status.StatusCode, fr.Status.GetErrorMessage())
		var out [][]string
		for _, c := range fr.Results.Columns {
			if c.StringVal != nil {
				out = append(out, c.StringVal.Values)
			}
		}
		return out
	}
	s, err := f.h.GetSchemas(f.ctx, &tcli.TGetSchemasReq{SessionHandle: f.sh})
	require.NoError(t, err)
	assert.Contains(t, rows(s.Status, s.OperationHandle)[0], "main")

	name := tcli.TPatternOrIdentifier("t")
	tb, err := f.h.GetTables(f.ctx, &tcli.TGetTablesReq{SessionHandle: f.sh, TableName: &name})
	require.NoError(t, err)
	got := rows(tb.Status, tb.OperationHandle)
	assert.Equal(t, []string{"t"}, got[2])
	assert.Equal(t, []string{"TABLE"}, got[3])

	col := tcli.TPatternOrIdentifier("d%")
	cs, err := f.h.GetColumns(f.ctx, &tcli.TGetColumnsReq{SessionHandle: f.sh, TableName: &name, ColumnName: &col})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, cs.Status.StatusCode)
	fr := f.fetch(t, cs.OperationHandle, 100)
	assert.Equal(t, []string{"d", "dt"}, fr.Results.Columns[3].StringVal.Values)
	assert.Equal(t, []int32{3, 91}, fr.Results.Columns[4].I32Val.Values) // java.sql.Types DECIMAL, DATE

	tt, err := f.h.GetTableTypes(f.ctx, &tcli.TGetTableTypesReq{SessionHandle: f.sh})
	require.NoError(t, err)
	assert.Equal(t, []string{"TABLE", "VIEW"}, rows(tt.Status, tt.OperationHandle)[0])

	info, err := f.h.GetInfo(f.ctx, &tcli.TGetInfoReq{SessionHandle: f.sh, InfoType: tcli.TGetInfoType_CLI_DBMS_VER})
	require.NoError(t, err)
	assert.Equal(t, "v9", info.InfoValue.GetStringValue())

	// impyla's "any" is a regular expression.
	any := tcli.TPatternOrIdentifier(".*")
	tb, err = f.h.GetTables(f.ctx, &tcli.TGetTablesReq{SessionHandle: f.sh, SchemaName: &any, TableName: &any})
	require.NoError(t, err)
	assert.Contains(t, rows(tb.Status, tb.OperationHandle)[2], "t")

	cat, err := f.h.GetCatalogs(f.ctx, &tcli.TGetCatalogsReq{SessionHandle: f.sh})
	require.NoError(t, err)
	assert.Contains(t, rows(cat.Status, cat.OperationHandle)[0], "memory")

	dt, err := f.h.GetDelegationToken(f.ctx, &tcli.TGetDelegationTokenReq{SessionHandle: f.sh})
	require.NoError(t, err)
	assert.Equal(t, "hs2: not supported: delegation tokens", dt.Status.GetErrorMessage())
	assert.Equal(t, "0A000", dt.Status.GetSqlState())
}

// TestTypeInfoAndFunctions: GetTypeInfo lists the types the server maps,
// with their java.sql.Types codes in JDBC's order; GetFunctions finds
// DuckDB's functions by pattern.
func TestTypeInfoAndFunctions(t *testing.T) {
	f := newFixture(t)
	ti, err := f.h.GetTypeInfo(f.ctx, &tcli.TGetTypeInfoReq{SessionHandle: f.sh})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, ti.Status.StatusCode, ti.Status.GetErrorMessage())
	md, err := f.h.GetResultSetMetadata(f.ctx, &tcli.TGetResultSetMetadataReq{OperationHandle: ti.OperationHandle})
	require.NoError(t, err)
	var names []string
	for _, c := range md.Schema.Columns {
		names = append(names, c.ColumnName)
	}
	assert.Equal(t, []string{"TYPE_NAME", "DATA_TYPE", "PRECISION", "LITERAL_PREFIX", "LITERAL_SUFFIX", "CREATE_PARAMS",
		"NULLABLE", "CASE_SENSITIVE", "SEARCHABLE", "UNSIGNED_ATTRIBUTE", "FIXED_PREC_SCALE", "AUTO_INCREMENT",
		"LOCAL_TYPE_NAME", "MINIMUM_SCALE", "MAXIMUM_SCALE", "SQL_DATA_TYPE", "SQL_DATETIME_SUB", "NUM_PREC_RADIX"}, names)
	fr := f.fetch(t, ti.OperationHandle, 100)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, fr.Status.StatusCode, fr.Status.GetErrorMessage())
	cols := fr.Results.Columns
	assert.Equal(t, []string{"TINYINT", "BIGINT", "BLOB", "DECIMAL", "INTEGER", "SMALLINT", "FLOAT", "DOUBLE",
		"VARCHAR", "BOOLEAN", "DATE", "TIMESTAMP"}, cols[0].StringVal.Values)
	assert.Equal(t, []int32{-6, -5, -2, 3, 4, 5, 6, 8, 12, 16, 91, 93}, cols[1].I32Val.Values)
	assert.Equal(t, "precision,scale", cols[5].StringVal.Values[3])
	assert.Equal(t, "DATE '", cols[3].StringVal.Values[10])

	fn := func(schema *tcli.TPatternOrIdentifier, name string) [][]string {
		t.Helper()
		r, err := f.h.GetFunctions(f.ctx, &tcli.TGetFunctionsReq{SessionHandle: f.sh, SchemaName: schema, FunctionName: tcli.TPatternOrIdentifier(name)})
		require.NoError(t, err)
		require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, r.Status.StatusCode, r.Status.GetErrorMessage())
		fr := f.fetch(t, r.OperationHandle, 10000)
		require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, fr.Status.StatusCode, fr.Status.GetErrorMessage())
		var out [][]string
		for i := range fr.Results.Columns[2].StringVal.Values {
			out = append(out, []string{fr.Results.Columns[1].StringVal.Values[i], fr.Results.Columns[2].StringVal.Values[i],
				fmt.Sprint(fr.Results.Columns[4].I32Val.Values[i])})
		}
		return out
	}
	// One row per name and kind though DuckDB has overloads of both.
	assert.Equal(t, [][]string{{"main", "tpch_answers", "2"}, {"main", "tpch_queries", "2"}}, fn(nil, "tpch\\_%"))
	assert.Equal(t, [][]string{{"main", "upper", "1"}}, fn(&any2, "upper"))
	assert.Greater(t, len(fn(nil, ".*")), 500, "impyla's get_functions asks for every function")
	assert.Empty(t, fn(nil, "no_such_function"))
}

var any2 = tcli.TPatternOrIdentifier("*")

// TestKeys: GetPrimaryKeys and GetCrossReference read DuckDB's
// constraints; the TPC-H tables declare none.
func TestKeys(t *testing.T) {
	f := newFixture(t)
	ex := f.exec(t, `CREATE TABLE p_k(a INTEGER, b_x INTEGER, PRIMARY KEY (a, b_x));
		CREATE TABLE c_k(x INTEGER, y INTEGER, FOREIGN KEY (x, y) REFERENCES p_k(a, b_x))`, false)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, ex.Status.StatusCode, ex.Status.GetErrorMessage())
	id := func(s string) *tcli.TIdentifier { v := tcli.TIdentifier(s); return &v }
	strs := func(op *tcli.TOperationHandle, cols ...int) [][]string {
		t.Helper()
		fr := f.fetch(t, op, 100)
		require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, fr.Status.StatusCode, fr.Status.GetErrorMessage())
		var out [][]string
		for _, c := range cols {
			out = append(out, fr.Results.Columns[c].StringVal.Values)
		}
		return out
	}

	pk, err := f.h.GetPrimaryKeys(f.ctx, &tcli.TGetPrimaryKeysReq{SessionHandle: f.sh, TableName: id("p_k")})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, pk.Status.StatusCode, pk.Status.GetErrorMessage())
	assert.Equal(t, [][]string{{"p_k", "p_k"}, {"a", "b_x"}, {"p_k_a_b_x_pkey", "p_k_a_b_x_pkey"}}, strs(pk.OperationHandle, 2, 3, 5))
	// "_" is not a wildcard in an identifier.
	pk, err = f.h.GetPrimaryKeys(f.ctx, &tcli.TGetPrimaryKeysReq{SessionHandle: f.sh, TableName: id("p_x")})
	require.NoError(t, err)
	assert.Equal(t, [][]string{{}}, strs(pk.OperationHandle, 2))
	pk, err = f.h.GetPrimaryKeys(f.ctx, &tcli.TGetPrimaryKeysReq{SessionHandle: f.sh, TableName: id("t")})
	require.NoError(t, err)
	assert.Equal(t, [][]string{{}}, strs(pk.OperationHandle, 2), "t declares no key")

	xr, err := f.h.GetCrossReference(f.ctx, &tcli.TGetCrossReferenceReq{SessionHandle: f.sh,
		ParentTableName: id("p_k"), ForeignTableName: id("c_k")})
	require.NoError(t, err)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, xr.Status.StatusCode, xr.Status.GetErrorMessage())
	assert.Equal(t, [][]string{{"p_k", "p_k"}, {"a", "b_x"}, {"c_k", "c_k"}, {"x", "y"}, {"p_k_a_b_x_pkey", "p_k_a_b_x_pkey"}},
		strs(xr.OperationHandle, 2, 3, 6, 7, 12))
	xr, err = f.h.GetCrossReference(f.ctx, &tcli.TGetCrossReferenceReq{SessionHandle: f.sh,
		ParentTableName: id("c_k"), ForeignTableName: id("p_k")})
	require.NoError(t, err)
	assert.Equal(t, [][]string{{}}, strs(xr.OperationHandle, 2), "no key of p_k references c_k")
}

// TestUseDefault: Hive's `USE default`, sent by PyHive on connect, is
// the engine's default schema.
func TestUseDefault(t *testing.T) {
	f := newFixture(t)
	for _, s := range []string{"USE default", "use `default`;", "  Use Default  "} {
		ex := f.exec(t, s, false)
		assert.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, ex.Status.StatusCode, s)
	}
}

// TestLimits: past the open sessions and operations allowed, calls get an
// error status, and closing one makes room again.
func TestLimits(t *testing.T) {
	f := newFixture(t, WithLimits(2, 2))
	f.open(t) // the fixture's and this one: 2
	r, err := f.h.OpenSession(f.ctx, &tcli.TOpenSessionReq{ClientProtocol: tcli.TProtocolVersion_HIVE_CLI_SERVICE_PROTOCOL_V10})
	require.NoError(t, err)
	assert.Equal(t, tcli.TStatusCode_ERROR_STATUS, r.Status.StatusCode)
	assert.Equal(t, "hs2: too many open sessions (2): close some first", r.Status.GetErrorMessage())

	a, b := f.exec(t, "SELECT 1", false), f.exec(t, "SELECT 2", false)
	require.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, b.Status.StatusCode)
	c := f.exec(t, "SELECT 3", false)
	assert.Equal(t, tcli.TStatusCode_ERROR_STATUS, c.Status.StatusCode)
	assert.Equal(t, "hs2: too many open operations (2): close some first", c.Status.GetErrorMessage())
	assert.Equal(t, "HY000", c.Status.GetSqlState())
	_, err = f.h.CloseOperation(f.ctx, &tcli.TCloseOperationReq{OperationHandle: a.OperationHandle})
	require.NoError(t, err)
	assert.Equal(t, tcli.TStatusCode_SUCCESS_STATUS, f.exec(t, "SELECT 3", false).Status.StatusCode)
}
