package dist

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	ab "github.com/hatrpc/hatrpc/tpch/apachegen/exchangebase"
	eb "github.com/hatrpc/hatrpc/tpch/gen/exchangebase"
)

// The vanilla configuration is Apache Thrift Go's code generated from
// idl/exchange_base.thrift (apachegen/), binary protocol over a buffered
// TSocket, on both sides. Its types have the same fields as hatgen's;
// these adapters convert one into the other.

const apacheBuffer = 64 << 10

func thriftConf(timeout time.Duration) *thrift.TConfiguration {
	return &thrift.TConfiguration{ConnectTimeout: 10 * time.Second, SocketTimeout: timeout, MaxMessageSize: 4 * maxChunkBytes}
}

// apacheHandler serves a Worker through Apache Thrift's processor.
type apacheHandler struct{ w exchanger }

var _ ab.Exchange = apacheHandler{}

func (h apacheHandler) Info(ctx context.Context) (*ab.WorkerInfo, error) {
	i, err := h.w.Info(ctx)
	if err != nil {
		return nil, err
	}
	return (*ab.WorkerInfo)(i), nil
}

func (h apacheHandler) OpenFragment(ctx context.Context, req *ab.OpenReq) (*ab.OpenResp, error) {
	in := &eb.OpenReq{Sql: req.Sql, Tag: req.Tag, Peers: req.Peers, Spool: (*eb.Input)(req.Spool)}
	for _, i := range req.Inputs {
		if i == nil {
			return nil, &ab.FragmentError{Message: "dist: a nil input"}
		}
		in.Inputs = append(in.Inputs, (*eb.Input)(i))
	}
	r, err := h.w.OpenFragment(ctx, in)
	if err != nil {
		return nil, toApacheErr(err)
	}
	out := &ab.OpenResp{Handle: r.Handle, Columns: make([]*ab.ColumnMeta, len(r.Columns)), InputBytes: r.InputBytes}
	for i, c := range r.Columns {
		out.Columns[i] = &ab.ColumnMeta{Name: c.Name, DbType: c.DbType, Kind: ab.Kind(c.Kind)}
	}
	return out, nil
}

func (h apacheHandler) FetchChunk(ctx context.Context, req *ab.FetchReq) (*ab.Chunk, error) {
	c, err := h.w.FetchChunk(ctx, (*eb.FetchReq)(req))
	if err != nil {
		return nil, toApacheErr(err)
	}
	out := &ab.Chunk{Rows: c.Rows, Last: c.Last, Columns: make([]*ab.Column, len(c.Columns))}
	for i, col := range c.Columns {
		out.Columns[i] = (*ab.Column)(col)
	}
	return out, nil
}

func (h apacheHandler) CloseFragment(ctx context.Context, handle int64) error {
	return h.w.CloseFragment(ctx, handle)
}

func (h apacheHandler) Cancel(ctx context.Context, tag string) error { return h.w.Cancel(ctx, tag) }

func toApacheErr(err error) error {
	if fe, ok := err.(*eb.FragmentError); ok {
		return &ab.FragmentError{Message: fe.Message}
	}
	return err
}

// ServeApache serves w with Apache Thrift's TSimpleServer on ln until
// stop is called.
func ServeApache(w *Worker, ln net.Listener) (stop func() error) { return serveApache(w, ln) }

func serveApache(w exchanger, ln net.Listener) (stop func() error) {
	conf := thriftConf(0)
	srv := thrift.NewTSimpleServer4(ab.NewExchangeProcessor(apacheHandler{w}),
		&listenerTransport{ln: ln, conf: conf},
		thrift.NewTBufferedTransportFactory(apacheBuffer), thrift.NewTBinaryProtocolFactoryConf(conf))
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	return func() error {
		err := srv.Stop()
		<-done
		return err
	}
}

// listenerTransport is Apache Thrift's TServerTransport on a listener of
// ours (TServerSocket listens itself, on an address only).
type listenerTransport struct {
	ln   net.Listener
	conf *thrift.TConfiguration
}

func (l *listenerTransport) Listen() error { return nil }

func (l *listenerTransport) Accept() (thrift.TTransport, error) {
	c, err := l.ln.Accept()
	if err != nil {
		return nil, err
	}
	return thrift.NewTSocketFromConnConf(c, l.conf), nil
}

func (l *listenerTransport) Close() error { return l.ln.Close() }

func (l *listenerTransport) Interrupt() error { return l.ln.Close() }

// apachePeer is a vanilla client of one worker: Apache Thrift's client
// has one call in flight per connection, so each fragment gets a
// connection of its own (and so does each Cancel).
type apachePeer struct {
	addr    string
	timeout time.Duration
}

type apacheConn struct {
	trans thrift.TTransport
	c     *ab.ExchangeClient
}

func (p *apachePeer) dial(ctx context.Context) (*apacheConn, error) {
	conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	conf := thriftConf(p.timeout)
	trans := thrift.NewTBufferedTransport(thrift.NewTSocketFromConnConf(conn, conf), apacheBuffer)
	return &apacheConn{trans: trans, c: ab.NewExchangeClientFactory(trans, thrift.NewTBinaryProtocolFactoryConf(conf))}, nil
}

// session returns a client for one fragment and the function releasing
// it; ctx bounds the dial only (each call watches its own context).
func (p *apachePeer) session(ctx context.Context) (exchanger, func(), bool, error) {
	c, err := p.dial(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	return apacheExchanger{c}, func() { _ = c.trans.Close() }, true, nil
}

func (p *apachePeer) close() error { return nil }

// apacheExchanger converts between the two generated type sets. Each
// call's context ending (the client gave up, the call's deadline) closes
// the connection, the fragment's own: Apache Thrift's socket reads do not
// watch the context, and this is the only way to end a call blocked in
// one against a worker that never answers.
type apacheExchanger struct{ conn *apacheConn }

func (a apacheExchanger) watch(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() { _ = a.conn.trans.Close() })
}

func (a apacheExchanger) Info(ctx context.Context) (*eb.WorkerInfo, error) {
	defer a.watch(ctx)()
	i, err := a.conn.c.Info(ctx)
	if err != nil {
		return nil, err
	}
	return (*eb.WorkerInfo)(i), nil
}

func (a apacheExchanger) OpenFragment(ctx context.Context, req *eb.OpenReq) (*eb.OpenResp, error) {
	defer a.watch(ctx)()
	in := &ab.OpenReq{Sql: req.Sql, Tag: req.Tag, Peers: req.Peers, Spool: (*ab.Input)(req.Spool)}
	for _, i := range req.Inputs {
		in.Inputs = append(in.Inputs, (*ab.Input)(i))
	}
	r, err := a.conn.c.OpenFragment(ctx, in)
	if err != nil {
		return nil, fromApacheErr(err)
	}
	out := &eb.OpenResp{Handle: r.Handle, Columns: make([]*eb.ColumnMeta, len(r.Columns)), InputBytes: r.InputBytes}
	for i, c := range r.Columns {
		if c == nil {
			return nil, fmt.Errorf("dist: OpenFragment answered a nil column")
		}
		out.Columns[i] = &eb.ColumnMeta{Name: c.Name, DbType: c.DbType, Kind: eb.Kind(c.Kind)}
	}
	return out, nil
}

func (a apacheExchanger) FetchChunk(ctx context.Context, req *eb.FetchReq) (*eb.Chunk, error) {
	defer a.watch(ctx)()
	c, err := a.conn.c.FetchChunk(ctx, (*ab.FetchReq)(req))
	if err != nil {
		return nil, fromApacheErr(err)
	}
	out := &eb.Chunk{Rows: c.Rows, Last: c.Last, Columns: make([]*eb.Column, len(c.Columns))}
	for i, col := range c.Columns {
		out.Columns[i] = (*eb.Column)(col)
	}
	return out, nil
}

func (a apacheExchanger) CloseFragment(ctx context.Context, handle int64) error {
	defer a.watch(ctx)()
	return a.conn.c.CloseFragment(ctx, handle)
}

func (a apacheExchanger) Cancel(ctx context.Context, tag string) error {
	defer a.watch(ctx)()
	return a.conn.c.Cancel(ctx, tag)
}

func fromApacheErr(err error) error {
	if fe, ok := err.(*ab.FragmentError); ok {
		return &eb.FragmentError{Message: fe.Message}
	}
	return err
}
