// Package hs2 is a HiveServer2-compatible SQL service: Apache Hive's
// TCLIService (hatgen-generated from its TCLIService.thrift) answered by
// an embedded SQL engine behind database/sql (DuckDB in this module).
// Standard HiveServer2 clients (impyla, PyHive, gohive) connect to it with
// NOSASL over a plain Thrift socket; HatRPC clients over TCP or lanes.
package hs2

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/tpch/gen/hs2"
	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

// Handler answers TCLIService calls. It satisfies the handler interface of
// every generated variant of the service (tcliservice, hs2), whose
// functions take the same types.
type Handler struct {
	db   *sql.DB
	meta Engine // the metadata calls' queries (information_schema)
	opts options

	mu           sync.Mutex
	sessions     map[handleKey]*session
	ops          map[handleKey]*operation
	expired      map[handleKey]string // what of it expired (idle.go)
	expiredOrder []handleKey

	idleStop, idleDone chan struct{}
	closeOnce          sync.Once
}

type session struct {
	id       *tcli.THandleIdentifier
	ops      map[handleKey]*operation
	lastUsed time.Time // the last call naming it or one of its operations
}

type options struct {
	logger       *slog.Logger
	maxFetchRows int
	maxSessions  int
	maxOps       int
	dbmsName     string
	dbmsVersion  string
	engine       Engine
	idle         time.Duration
	now          func() time.Time
}

// Option configures a Handler.
type Option func(*options)

// WithLogger sets where the handler logs (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMaxFetchRows caps the rows one FetchResults returns whatever the
// client asks for (default 10000), which bounds a reply's size.
func WithMaxFetchRows(n int) Option { return func(o *options) { o.maxFetchRows = n } }

// WithLimits caps the open sessions and the open operations (each holds
// a cursor in the engine) of the whole server (defaults 256 and 1024):
// past them OpenSession and the calls that start an operation answer an
// error status until some are closed.
func WithLimits(sessions, operations int) Option {
	return func(o *options) { o.maxSessions, o.maxOps = sessions, operations }
}

// ErrTooMany is the error of a call past WithLimits.
var ErrTooMany = errors.New("hs2: too many open")

// WithDBMS sets what GetInfo answers for CLI_DBMS_NAME and CLI_DBMS_VER.
func WithDBMS(name, version string) Option {
	return func(o *options) { o.dbmsName, o.dbmsVersion = name, version }
}

// WithEngine runs the clients' statements on e instead of on the
// handler's database (the metadata calls still query the database).
func WithEngine(e Engine) Option { return func(o *options) { o.engine = e } }

// New returns a Handler running statements on db.
func New(db *sql.DB, opts ...Option) *Handler {
	o := options{logger: slog.Default(), maxFetchRows: 10000, maxSessions: 256, maxOps: 1024,
		dbmsName: "HatRPC HiveServer2", dbmsVersion: "1", now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	if o.engine == nil {
		o.engine = DB{DB: db}
	}
	h := &Handler{db: db, meta: DB{DB: db}, opts: o, sessions: map[handleKey]*session{}, ops: map[handleKey]*operation{},
		expired: map[handleKey]string{}, idleStop: make(chan struct{}), idleDone: make(chan struct{})}
	if o.idle > 0 {
		h.watchIdle()
	} else {
		close(h.idleDone)
	}
	return h
}

// Close ends every session and its operations.
func (h *Handler) Close() {
	h.closeOnce.Do(func() { close(h.idleStop) })
	<-h.idleDone
	h.mu.Lock()
	var ops []*operation
	for _, op := range h.ops {
		ops = append(ops, op)
	}
	h.sessions, h.ops = map[handleKey]*session{}, map[handleKey]*operation{}
	h.mu.Unlock()
	for _, op := range ops {
		_ = op.close(false)
	}
}

// minProtocol is the first protocol version with columnar result sets,
// the only form this server sends.
const minProtocol = tcli.TProtocolVersion_HIVE_CLI_SERVICE_PROTOCOL_V6

func (h *Handler) OpenSession(ctx context.Context, req *tcli.TOpenSessionReq) (*tcli.TOpenSessionResp, error) {
	v := req.ClientProtocol
	if v < minProtocol {
		return &tcli.TOpenSessionResp{ServerProtocolVersion: minProtocol, Status: statusOf(&UnsupportedError{
			What: fmt.Sprintf("client protocol %v: row-based result sets (protocol V6 and later send columns)", v)})}, nil
	}
	if v > tcli.TProtocolVersion_HIVE_CLI_SERVICE_PROTOCOL_V11 {
		v = tcli.TProtocolVersion_HIVE_CLI_SERVICE_PROTOCOL_V11
	}
	s := &session{id: newHandleID(), ops: map[handleKey]*operation{}, lastUsed: h.opts.now()}
	k, _ := keyOf(s.id)
	h.mu.Lock()
	if len(h.sessions) >= h.opts.maxSessions {
		h.mu.Unlock()
		return &tcli.TOpenSessionResp{ServerProtocolVersion: v, Status: statusOf(fmt.Errorf(
			"%w sessions (%d): close some first", ErrTooMany, h.opts.maxSessions))}, nil
	}
	h.sessions[k] = s
	h.mu.Unlock()
	return &tcli.TOpenSessionResp{
		Status:                okStatus(),
		ServerProtocolVersion: v,
		SessionHandle:         &tcli.TSessionHandle{SessionId: s.id},
		Configuration:         map[string]string{},
	}, nil
}

func (h *Handler) session(sh *tcli.TSessionHandle) (*session, error) {
	if sh == nil {
		return nil, fmt.Errorf("%w: no session handle", ErrInvalidHandle)
	}
	k, ok := keyOf(sh.SessionId)
	if !ok {
		return nil, fmt.Errorf("%w: malformed session handle", ErrInvalidHandle)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions[k]
	if s == nil || !sameSecret(s.id, sh.SessionId) {
		if what, ok := h.expired[k]; ok && s == nil {
			return nil, h.expiredError(what)
		}
		return nil, fmt.Errorf("%w: unknown or closed session", ErrInvalidHandle)
	}
	s.lastUsed = h.opts.now()
	return s, nil
}

func (h *Handler) operation(oh *tcli.TOperationHandle) (*operation, error) {
	if oh == nil {
		return nil, fmt.Errorf("%w: no operation handle", ErrInvalidHandle)
	}
	k, ok := keyOf(oh.OperationId)
	if !ok {
		return nil, fmt.Errorf("%w: malformed operation handle", ErrInvalidHandle)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	op := h.ops[k]
	if op == nil || !sameSecret(op.id, oh.OperationId) {
		if what, ok := h.expired[k]; ok && op == nil {
			return nil, h.expiredError(what)
		}
		return nil, fmt.Errorf("%w: unknown or closed operation", ErrInvalidHandle)
	}
	if s := h.sessions[op.session]; s != nil {
		s.lastUsed = h.opts.now()
	}
	return op, nil
}

func (h *Handler) CloseSession(ctx context.Context, req *tcli.TCloseSessionReq) (*tcli.TCloseSessionResp, error) {
	s, err := h.session(req.SessionHandle)
	if err != nil {
		return &tcli.TCloseSessionResp{Status: statusOf(err)}, nil
	}
	k, _ := keyOf(s.id)
	h.mu.Lock()
	delete(h.sessions, k)
	ops := s.ops
	for ok := range ops {
		delete(h.ops, ok)
	}
	s.ops = nil
	h.mu.Unlock()
	for _, op := range ops {
		_ = op.close(false)
	}
	return &tcli.TCloseSessionResp{Status: okStatus()}, nil
}

func (h *Handler) GetInfo(ctx context.Context, req *tcli.TGetInfoReq) (*tcli.TGetInfoResp, error) {
	if _, err := h.session(req.SessionHandle); err != nil {
		return &tcli.TGetInfoResp{Status: statusOf(err), InfoValue: &tcli.TGetInfoValue{}}, nil
	}
	var s string
	switch req.InfoType {
	case tcli.TGetInfoType_CLI_DBMS_NAME:
		s = h.opts.dbmsName
	case tcli.TGetInfoType_CLI_DBMS_VER:
		s = h.opts.dbmsVersion
	case tcli.TGetInfoType_CLI_SERVER_NAME:
		s = "hatrpc-hs2"
	default:
		err := &UnsupportedError{What: fmt.Sprintf("GetInfo %v", req.InfoType)}
		return &tcli.TGetInfoResp{Status: statusOf(err), InfoValue: &tcli.TGetInfoValue{}}, nil
	}
	return &tcli.TGetInfoResp{Status: okStatus(), InfoValue: &tcli.TGetInfoValue{StringValue: &s}}, nil
}

// useDefault matches Hive's `USE default`, which clients such as PyHive
// send on connect: Hive's default database is the engine's default
// schema, so it changes nothing.
var useDefault = regexp.MustCompile("(?i)^\\s*use\\s+`?default`?\\s*;?\\s*$")

// newOp registers an operation of session s and starts query.
func (h *Handler) newOp(s *session, typ tcli.TOperationType, query string, args ...any) (*operation, error) {
	op := &operation{id: newHandleID(), typ: typ}
	op.session, _ = keyOf(s.id)
	k, _ := keyOf(op.id)
	h.mu.Lock()
	if s.ops == nil {
		h.mu.Unlock()
		return nil, fmt.Errorf("%w: session closed", ErrInvalidHandle)
	}
	if len(h.ops) >= h.opts.maxOps {
		h.mu.Unlock()
		return nil, fmt.Errorf("%w operations (%d): close some first", ErrTooMany, h.opts.maxOps)
	}
	s.ops[k] = op
	h.ops[k] = op
	h.mu.Unlock()
	e := h.meta
	if typ == tcli.TOperationType_EXECUTE_STATEMENT {
		e = h.opts.engine
	}
	op.start(e, query, args...)
	return op, nil
}

func (h *Handler) ExecuteStatement(ctx context.Context, req *tcli.TExecuteStatementReq) (*tcli.TExecuteStatementResp, error) {
	s, err := h.session(req.SessionHandle)
	if err != nil {
		return &tcli.TExecuteStatementResp{Status: statusOf(err)}, nil
	}
	query := req.Statement
	if useDefault.MatchString(query) {
		query = "SELECT 1 WHERE false"
	}
	op, err := h.newOp(s, tcli.TOperationType_EXECUTE_STATEMENT, query)
	if err != nil {
		return &tcli.TExecuteStatementResp{Status: statusOf(err)}, nil
	}
	if !req.RunAsync {
		if err := op.wait(ctx); err != nil {
			return &tcli.TExecuteStatementResp{Status: statusOf(err), OperationHandle: op.handle()}, nil
		}
	}
	return &tcli.TExecuteStatementResp{Status: okStatus(), OperationHandle: op.handle()}, nil
}

func (h *Handler) GetOperationStatus(ctx context.Context, req *tcli.TGetOperationStatusReq) (*tcli.TGetOperationStatusResp, error) {
	op, err := h.operation(req.OperationHandle)
	if err != nil {
		return &tcli.TGetOperationStatusResp{Status: statusOf(err)}, nil
	}
	st := op.state()
	started := op.started.UnixMilli()
	resp := &tcli.TGetOperationStatusResp{Status: okStatus(), OperationState: &st, OperationStarted: &started}
	if st != tcli.TOperationState_RUNNING_STATE {
		ended := op.ended.UnixMilli()
		has := op.hasResult
		resp.OperationCompleted, resp.HasResultSet = &ended, &has
	}
	if st == tcli.TOperationState_ERROR_STATE {
		es := statusOf(op.err)
		resp.SqlState, resp.ErrorCode, resp.ErrorMessage = es.SqlState, es.ErrorCode, es.ErrorMessage
	}
	return resp, nil
}

func (h *Handler) CancelOperation(ctx context.Context, req *tcli.TCancelOperationReq) (*tcli.TCancelOperationResp, error) {
	op, err := h.operation(req.OperationHandle)
	if err != nil {
		return &tcli.TCancelOperationResp{Status: statusOf(err)}, nil
	}
	if err := op.close(true); err != nil {
		return &tcli.TCancelOperationResp{Status: statusOf(err)}, nil
	}
	return &tcli.TCancelOperationResp{Status: okStatus()}, nil
}

func (h *Handler) CloseOperation(ctx context.Context, req *tcli.TCloseOperationReq) (*tcli.TCloseOperationResp, error) {
	op, err := h.operation(req.OperationHandle)
	if err != nil {
		return &tcli.TCloseOperationResp{Status: statusOf(err)}, nil
	}
	k, _ := keyOf(op.id)
	h.mu.Lock()
	delete(h.ops, k)
	if s := h.sessions[op.session]; s != nil && s.ops != nil {
		delete(s.ops, k)
	}
	h.mu.Unlock()
	if err := op.close(false); err != nil {
		return &tcli.TCloseOperationResp{Status: statusOf(err)}, nil
	}
	return &tcli.TCloseOperationResp{Status: okStatus()}, nil
}

func (h *Handler) GetResultSetMetadata(ctx context.Context, req *tcli.TGetResultSetMetadataReq) (*tcli.TGetResultSetMetadataResp, error) {
	op, err := h.operation(req.OperationHandle)
	if err == nil {
		err = op.wait(ctx)
	}
	if err != nil {
		return &tcli.TGetResultSetMetadataResp{Status: statusOf(err)}, nil
	}
	return &tcli.TGetResultSetMetadataResp{Status: okStatus(), Schema: tableSchema(op.cols)}, nil
}

// fetchLog is TFetchResultsReq.fetchType for the operation's log, which
// this server does not keep: it answers an empty one.
const fetchLog = 1

func (h *Handler) FetchResults(ctx context.Context, req *tcli.TFetchResultsReq) (*tcli.TFetchResultsResp, error) {
	op, err := h.operation(req.OperationHandle)
	if err != nil {
		return &tcli.TFetchResultsResp{Status: statusOf(err)}, nil
	}
	if req.FetchType == fetchLog {
		no := false
		logs := &tcli.TRowSet{Rows: []*tcli.TRow{}, Columns: []*tcli.TColumn{{StringVal: &tcli.TStringColumn{Values: []string{}, Nulls: []byte{}}}}}
		return &tcli.TFetchResultsResp{Status: okStatus(), HasMoreRows: &no, Results: logs}, nil
	}
	switch req.Orientation {
	case tcli.TFetchOrientation_FETCH_NEXT, tcli.TFetchOrientation_FETCH_FIRST:
	default:
		err := &UnsupportedError{What: fmt.Sprintf("fetch orientation %v", req.Orientation)}
		return &tcli.TFetchResultsResp{Status: statusOf(err)}, nil
	}
	n := int(req.MaxRows)
	if n <= 0 || n > h.opts.maxFetchRows {
		n = h.opts.maxFetchRows
	}
	rs, more, err := op.fetch(ctx, req.Orientation == tcli.TFetchOrientation_FETCH_FIRST, n)
	if err != nil {
		return &tcli.TFetchResultsResp{Status: statusOf(err)}, nil
	}
	return &tcli.TFetchResultsResp{Status: okStatus(), HasMoreRows: &more, Results: rs}, nil
}

func unsupported(what string) *tcli.TStatus { return statusOf(&UnsupportedError{What: what}) }

var (
	_ tcli.TCLIServiceHandler = (*Handler)(nil)
	_ hs2.TCLIServiceHandler  = (*Handler)(nil)
)
