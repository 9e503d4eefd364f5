// Package bench runs TPC-H queries through HiveServer2 clients (HatRPC's
// generated clients of each configuration, and Apache Thrift Go's
// generated TCLIService client over a TSocket), checks their answers and
// times them.
package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/hatrpc/hatrpc/pkg/client"
	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// Session runs statements over one HiveServer2 session.
type Session interface {
	// Query runs sql and returns its whole result, each cell as text.
	Query(ctx context.Context, sql string) (*Result, error)
	Close(ctx context.Context) error
}

// Result is a query's answer: column names and rows of cells as text
// (NULL as "NULL"), paged in FetchSize rows.
type Result struct {
	Columns []string
	Rows    [][]string
	Pages   int
}

// FetchSize is the maxRows every FetchResults of a Session asks for.
const FetchSize = 10000

// StatusError is a HiveServer2 call answered with an error status.
type StatusError struct {
	Call     string
	Code     string
	SQLState string
	Message  string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: %s (sqlState %s): %s", e.Call, e.Code, e.SQLState, e.Message)
}

// ErrNoResponse is a call answered without the fields it must carry.
var ErrNoResponse = errors.New("bench: incomplete response")

func checkStatus(call string, st *tcli.TStatus) error {
	if st == nil {
		return fmt.Errorf("%s: %w: no status", call, ErrNoResponse)
	}
	switch st.StatusCode {
	case tcli.TStatusCode_SUCCESS_STATUS, tcli.TStatusCode_SUCCESS_WITH_INFO_STATUS:
		return nil
	}
	return &StatusError{Call: call, Code: st.StatusCode.String(), SQLState: st.GetSqlState(), Message: st.GetErrorMessage()}
}

// hatrpcSession is a session over a HatRPC generated client.
type hatrpcSession struct {
	conn *client.Conn
	c    tcli.TCLIServiceHandler
	h    *tcli.TSessionHandle
}

// OpenHatRPC opens a session on the server at addr with the generated
// client of configuration cfg; rdma is client.WithRDMA's provider ("off"
// keeps every call on TCP, "shm" moves them onto shared-memory lanes when
// the server offers them).
func OpenHatRPC(ctx context.Context, addr string, cfg hs2.Config, rdma string, opts ...client.Option) (Session, error) {
	opts = append(append([]client.Option{client.WithRDMA(rdma)}, cfg.ClientOptions()...), opts...)
	conn, err := client.Dial(ctx, addr, opts...)
	if err != nil {
		return nil, err
	}
	c := hs2.Client(conn, cfg)
	resp, err := c.OpenSession(ctx, &tcli.TOpenSessionReq{ClientProtocol: tcli.TProtocolVersion_HIVE_CLI_SERVICE_PROTOCOL_V10})
	if err == nil {
		err = checkStatus("OpenSession", resp.Status)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &hatrpcSession{conn: conn, c: c, h: resp.SessionHandle}, nil
}

func (s *hatrpcSession) Query(ctx context.Context, sql string) (*Result, error) {
	ex, err := s.c.ExecuteStatement(ctx, &tcli.TExecuteStatementReq{SessionHandle: s.h, Statement: sql})
	if err != nil {
		return nil, err
	}
	if err := checkStatus("ExecuteStatement", ex.Status); err != nil {
		return nil, err
	}
	op := ex.OperationHandle
	defer func() { _, _ = s.c.CloseOperation(ctx, &tcli.TCloseOperationReq{OperationHandle: op}) }()
	md, err := s.c.GetResultSetMetadata(ctx, &tcli.TGetResultSetMetadataReq{OperationHandle: op})
	if err != nil {
		return nil, err
	}
	if err := checkStatus("GetResultSetMetadata", md.Status); err != nil {
		return nil, err
	}
	res := &Result{}
	for _, c := range md.Schema.GetColumns() {
		res.Columns = append(res.Columns, c.ColumnName)
	}
	for more := true; more; {
		fr, err := s.c.FetchResults(ctx, &tcli.TFetchResultsReq{OperationHandle: op, MaxRows: FetchSize})
		if err != nil {
			return nil, err
		}
		if err := checkStatus("FetchResults", fr.Status); err != nil {
			return nil, err
		}
		if fr.Results == nil {
			return nil, fmt.Errorf("FetchResults: %w: no rowset", ErrNoResponse)
		}
		if err := appendColumns(res, len(res.Columns), fr.Results.Columns); err != nil {
			return nil, err
		}
		res.Pages++
		more = fr.GetHasMoreRows()
	}
	return res, nil
}

func (s *hatrpcSession) Close(ctx context.Context) error {
	_, err := s.c.CloseSession(ctx, &tcli.TCloseSessionReq{SessionHandle: s.h})
	return errors.Join(err, s.conn.Close())
}

// appendColumns adds a columnar page to res as rows of text cells.
func appendColumns(res *Result, width int, cols []*tcli.TColumn) error {
	if len(cols) != width {
		return fmt.Errorf("FetchResults: %d columns, the schema has %d", len(cols), width)
	}
	if width == 0 {
		return nil
	}
	cells := make([][]string, width)
	for i, c := range cols {
		cells[i] = columnText(c)
	}
	n := len(cells[0])
	for i := range cells {
		if len(cells[i]) != n {
			return fmt.Errorf("FetchResults: column %d has %d values, column 0 has %d", i, len(cells[i]), n)
		}
	}
	for r := 0; r < n; r++ {
		row := make([]string, width)
		for i := range cells {
			row[i] = cells[i][r]
		}
		res.Rows = append(res.Rows, row)
	}
	return nil
}

func isNull(nulls []byte, i int) bool { return i/8 < len(nulls) && nulls[i/8]&(1<<(i%8)) != 0 }

func texts[T any](vals []T, nulls []byte, f func(T) string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		if isNull(nulls, i) {
			out[i] = "NULL"
		} else {
			out[i] = f(v)
		}
	}
	return out
}

func itoa[T ~int8 | ~int16 | ~int32 | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

func columnText(c *tcli.TColumn) []string {
	switch {
	case c.BoolVal != nil:
		return texts(c.BoolVal.Values, c.BoolVal.Nulls, strconv.FormatBool)
	case c.ByteVal != nil:
		return texts(c.ByteVal.Values, c.ByteVal.Nulls, itoa[int8])
	case c.I16Val != nil:
		return texts(c.I16Val.Values, c.I16Val.Nulls, itoa[int16])
	case c.I32Val != nil:
		return texts(c.I32Val.Values, c.I32Val.Nulls, itoa[int32])
	case c.I64Val != nil:
		return texts(c.I64Val.Values, c.I64Val.Nulls, itoa[int64])
	case c.DoubleVal != nil:
		return texts(c.DoubleVal.Values, c.DoubleVal.Nulls, func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) })
	case c.StringVal != nil:
		return texts(c.StringVal.Values, c.StringVal.Nulls, func(v string) string { return v })
	case c.BinaryVal != nil:
		return texts(c.BinaryVal.Values, c.BinaryVal.Nulls, func(v []byte) string { return string(v) })
	}
	return nil
}

// Lanes reports the session's calls that went over lanes (shm or rdma),
// per function.
func (s *hatrpcSession) Lanes() []client.LaneStats { return s.conn.LaneStats() }
