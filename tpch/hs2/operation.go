package hs2

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

// operation is one statement or metadata call. It runs in a goroutine of
// its own (so runAsync and CancelOperation work) and keeps the engine's
// cursor open: FetchResults reads maxRows rows at a time from it, so a
// result is paged and never held whole on the server.
type operation struct {
	id      *tcli.THandleIdentifier
	typ     tcli.TOperationType
	session handleKey
	cancel  context.CancelFunc
	done    chan struct{}
	started time.Time

	// Set before done is closed, read-only after.
	err       error
	cols      []colType
	hasResult bool
	ended     time.Time

	mu       sync.Mutex // FetchResults, one at a time
	rows     Cursor
	offset   int64
	ahead    bool // rows.Next() returned true for a row not yet scanned
	canceled bool
}

func (o *operation) handle() *tcli.TOperationHandle {
	return &tcli.TOperationHandle{OperationId: o.id, OperationType: o.typ, HasResultSet: true}
}

// start runs query on e; done closes once the first row (or the error)
// is known.
func (o *operation) start(e Engine, query string, args ...any) {
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel, o.done, o.started = cancel, make(chan struct{}), time.Now()
	go func() {
		defer close(o.done)
		defer func() { o.ended = time.Now() }()
		rows, err := e.Query(ctx, query, args...)
		if err != nil {
			o.err = err
			return
		}
		cols, err := columnTypes(rows)
		if err != nil {
			_ = rows.Close()
			o.err = err
			return
		}
		o.rows, o.cols, o.hasResult = rows, cols, len(cols) > 0
		o.ahead = rows.Next()
		if !o.ahead {
			o.err = rows.Err()
		}
	}()
}

func (o *operation) finished() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

func (o *operation) state() tcli.TOperationState {
	o.mu.Lock()
	canceled := o.canceled
	o.mu.Unlock()
	switch {
	case canceled:
		return tcli.TOperationState_CANCELED_STATE
	case !o.finished():
		return tcli.TOperationState_RUNNING_STATE
	case o.err != nil:
		return tcli.TOperationState_ERROR_STATE
	default:
		return tcli.TOperationState_FINISHED_STATE
	}
}

// wait blocks until the operation has its first row or its error.
func (o *operation) wait(ctx context.Context) error {
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetch reads up to maxRows rows into a columnar TRowSet and says whether
// more rows follow.
func (o *operation) fetch(ctx context.Context, first bool, maxRows int) (*tcli.TRowSet, bool, error) {
	if err := o.wait(ctx); err != nil {
		return nil, false, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.canceled {
		return nil, false, errors.New("hs2: operation canceled")
	}
	if first && o.offset > 0 {
		return nil, false, &UnsupportedError{What: "FETCH_FIRST after rows were fetched (the result is a forward-only cursor)"}
	}
	bs := make([]colBuilder, len(o.cols))
	for i := range bs {
		bs[i].t = o.cols[i]
	}
	vals := make([]any, len(o.cols))
	ptrs := make([]any, len(o.cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	start := o.offset
	for n := 0; n < maxRows && o.ahead; n++ {
		if err := o.rows.Scan(ptrs...); err != nil {
			return nil, false, err
		}
		for i := range bs {
			if err := bs[i].add(vals[i]); err != nil {
				return nil, false, err
			}
		}
		o.offset++
		o.ahead = o.rows.Next()
		if !o.ahead {
			if err := o.rows.Err(); err != nil {
				return nil, false, err
			}
		}
	}
	rs := &tcli.TRowSet{StartRowOffset: start, Rows: []*tcli.TRow{}, Columns: make([]*tcli.TColumn, len(bs))}
	for i := range bs {
		rs.Columns[i] = bs[i].column()
	}
	cc := int32(len(bs))
	rs.ColumnCount = &cc
	return rs, o.ahead, nil
}

// close cancels the query if it still runs and releases its cursor.
func (o *operation) close(canceled bool) error {
	o.cancel()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	if canceled {
		o.canceled = true
	}
	if o.rows == nil {
		return nil
	}
	err := o.rows.Close()
	o.rows, o.ahead = nil, false
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("hs2: closing the cursor: %w", err)
	}
	return nil
}
