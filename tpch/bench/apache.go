package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hiveserver"

	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

// apacheSession is the paper's "vanilla Thrift" client: Apache Thrift
// Go's generated TCLIService client (gohive's hiveserver package, made by
// Apache's compiler from Hive's IDL) over a buffered TSocket with the
// binary protocol, as HiveServer2's NOSASL transport is.
type apacheSession struct {
	trans thrift.TTransport
	c     *hiveserver.TCLIServiceClient
	h     *hiveserver.TSessionHandle
}

// OpenApache opens a session on the HiveServer2 at addr with Apache
// Thrift Go.
func OpenApache(ctx context.Context, addr string, timeout time.Duration) (Session, error) {
	conn, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return OpenApacheConn(ctx, conn, timeout)
}

// OpenApacheConn is OpenApache over a connection of the caller's, which
// the session closes.
func OpenApacheConn(ctx context.Context, conn net.Conn, timeout time.Duration) (Session, error) {
	conf := &thrift.TConfiguration{ConnectTimeout: timeout, SocketTimeout: timeout}
	trans := thrift.NewTBufferedTransport(thrift.NewTSocketFromConnConf(conn, conf), 64<<10)
	c := hiveserver.NewTCLIServiceClientFactory(trans, thrift.NewTBinaryProtocolFactoryConf(conf))
	req := hiveserver.NewTOpenSessionReq()
	req.ClientProtocol = hiveserver.TProtocolVersion_HIVE_CLI_SERVICE_PROTOCOL_V10
	resp, err := c.OpenSession(ctx, req)
	if err == nil {
		err = checkApache("OpenSession", resp.Status)
	}
	if err != nil {
		_ = trans.Close()
		return nil, err
	}
	return &apacheSession{trans: trans, c: c, h: resp.SessionHandle}, nil
}

func checkApache(call string, st *hiveserver.TStatus) error {
	if st == nil {
		return fmt.Errorf("%s: %w: no status", call, ErrNoResponse)
	}
	return checkStatus(call, &tcli.TStatus{StatusCode: tcli.TStatusCode(st.StatusCode), SqlState: st.SqlState, ErrorMessage: st.ErrorMessage})
}

func (s *apacheSession) Query(ctx context.Context, sql string) (*Result, error) {
	ex, err := s.c.ExecuteStatement(ctx, &hiveserver.TExecuteStatementReq{SessionHandle: s.h, Statement: sql})
	if err != nil {
		return nil, err
	}
	if err := checkApache("ExecuteStatement", ex.Status); err != nil {
		return nil, err
	}
	op := ex.OperationHandle
	defer func() { _, _ = s.c.CloseOperation(ctx, &hiveserver.TCloseOperationReq{OperationHandle: op}) }()
	md, err := s.c.GetResultSetMetadata(ctx, &hiveserver.TGetResultSetMetadataReq{OperationHandle: op})
	if err != nil {
		return nil, err
	}
	if err := checkApache("GetResultSetMetadata", md.Status); err != nil {
		return nil, err
	}
	res := &Result{}
	for _, c := range md.Schema.GetColumns() {
		res.Columns = append(res.Columns, c.ColumnName)
	}
	for more := true; more; {
		fr, err := s.c.FetchResults(ctx, &hiveserver.TFetchResultsReq{OperationHandle: op, MaxRows: FetchSize})
		if err != nil {
			return nil, err
		}
		if err := checkApache("FetchResults", fr.Status); err != nil {
			return nil, err
		}
		if fr.Results == nil {
			return nil, fmt.Errorf("FetchResults: %w: no rowset", ErrNoResponse)
		}
		cols := make([]*tcli.TColumn, len(fr.Results.Columns))
		for i, c := range fr.Results.Columns {
			cols[i] = fromApache(c)
		}
		if err := appendColumns(res, len(res.Columns), cols); err != nil {
			return nil, err
		}
		res.Pages++
		more = fr.GetHasMoreRows()
	}
	return res, nil
}

func (s *apacheSession) Close(ctx context.Context) error {
	_, err := s.c.CloseSession(ctx, &hiveserver.TCloseSessionReq{SessionHandle: s.h})
	return errors.Join(err, s.trans.Close())
}

// fromApache views Apache's decoded column as the generated one (the
// same slices; nothing is copied).
func fromApache(c *hiveserver.TColumn) *tcli.TColumn {
	switch {
	case c.BoolVal != nil:
		return &tcli.TColumn{BoolVal: &tcli.TBoolColumn{Values: c.BoolVal.Values, Nulls: c.BoolVal.Nulls}}
	case c.ByteVal != nil:
		return &tcli.TColumn{ByteVal: &tcli.TByteColumn{Values: c.ByteVal.Values, Nulls: c.ByteVal.Nulls}}
	case c.I16Val != nil:
		return &tcli.TColumn{I16Val: &tcli.TI16Column{Values: c.I16Val.Values, Nulls: c.I16Val.Nulls}}
	case c.I32Val != nil:
		return &tcli.TColumn{I32Val: &tcli.TI32Column{Values: c.I32Val.Values, Nulls: c.I32Val.Nulls}}
	case c.I64Val != nil:
		return &tcli.TColumn{I64Val: &tcli.TI64Column{Values: c.I64Val.Values, Nulls: c.I64Val.Nulls}}
	case c.DoubleVal != nil:
		return &tcli.TColumn{DoubleVal: &tcli.TDoubleColumn{Values: c.DoubleVal.Values, Nulls: c.DoubleVal.Nulls}}
	case c.StringVal != nil:
		return &tcli.TColumn{StringVal: &tcli.TStringColumn{Values: c.StringVal.Values, Nulls: c.StringVal.Nulls}}
	case c.BinaryVal != nil:
		return &tcli.TColumn{BinaryVal: &tcli.TBinaryColumn{Values: c.BinaryVal.Values, Nulls: c.BinaryVal.Nulls}}
	}
	return &tcli.TColumn{}
}
