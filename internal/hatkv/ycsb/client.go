package ycsb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// DB is the store under test. Fields nil means all fields. A method
// returns an error for a failed operation; the runner counts it and goes
// on.
type DB interface {
	Read(ctx context.Context, key string, fields []string) (map[string][]byte, error)
	Update(ctx context.Context, key string, values map[string][]byte) error
	Insert(ctx context.Context, key string, values map[string][]byte) error
	Scan(ctx context.Context, startKey string, count int, fields []string) ([]map[string][]byte, error)
	MultiRead(ctx context.Context, keys []string, fields []string) ([]map[string][]byte, error)
	MultiUpdate(ctx context.Context, keys []string, values []map[string][]byte) error
}

// RunOptions configures Run. Zero fields fall back to the workload's
// client properties (threadcount, target, maxexecutiontime).
type RunOptions struct {
	// Threads is the number of client goroutines.
	Threads int
	// Target throttles the whole run to this many operations per second.
	Target float64
	// MaxDuration ends the run early (without error) once it has elapsed.
	MaxDuration time.Duration
	// Load runs the load phase (RecordCount inserts) instead of the
	// transaction phase (OperationCount operations).
	Load bool
	// Operations overrides the operation count when > 0.
	Operations int64
	// Seed makes the run reproducible; thread i uses (Seed, i).
	Seed uint64
}

// Run drives db with the workload and records every operation in m. It
// stops early when ctx ends, returning the report so far and ctx.Err().
func Run(ctx context.Context, db DB, w *Workload, opts RunOptions, m *Measurements) (Report, error) {
	threads := opts.Threads
	if threads <= 0 {
		threads = w.cfg.ThreadCount
	}
	threads = max(threads, 1)
	target := opts.Target
	if target <= 0 {
		target = w.cfg.Target
	}
	limit := opts.MaxDuration
	if limit <= 0 {
		limit = w.cfg.MaxExecutionTime
	}
	runCtx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	// Like YCSB's -target, each thread gets an equal share of the rate
	// and waits for its next scheduled start time.
	var interval time.Duration
	if target > 0 {
		interval = time.Duration(float64(time.Second) * float64(threads) / target)
	}
	total := opts.Operations
	if total <= 0 {
		if opts.Load {
			total = w.cfg.InsertCount
		} else {
			total = w.cfg.OperationCount
		}
	}
	var issued atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(opts.Seed, uint64(t)))
			next := time.Now()
			for runCtx.Err() == nil && issued.Add(1) <= total {
				if interval > 0 {
					next = next.Add(interval)
					if d := time.Until(next); d > 0 {
						timer := time.NewTimer(d)
						select {
						case <-timer.C:
						case <-runCtx.Done():
							timer.Stop()
							return
						}
					}
				}
				var op Operation
				if opts.Load {
					op = w.NextLoad(r)
				} else {
					op = w.Next(r)
				}
				begin := time.Now()
				err := execute(runCtx, db, op)
				w.Done(op)
				if err != nil && runCtx.Err() != nil && errors.Is(err, runCtx.Err()) {
					return // cut off by the end of the run, not a DB failure
				}
				m.Record(op.Type.String(), time.Since(begin), err)
			}
		}(t)
	}
	wg.Wait()
	// Reaching MaxDuration is a normal end of the run; the caller's own
	// cancellation is not.
	return m.Report(time.Since(start)), ctx.Err()
}

// ErrShortBatch reports a multi-read answer of the wrong length.
var ErrShortBatch = errors.New("ycsb: multi-read returned the wrong number of records")

func execute(ctx context.Context, db DB, op Operation) error {
	switch op.Type {
	case OpRead:
		_, err := db.Read(ctx, op.Key, op.Fields)
		return err
	case OpUpdate:
		return db.Update(ctx, op.Key, op.Values)
	case OpInsert:
		return db.Insert(ctx, op.Key, op.Values)
	case OpScan:
		_, err := db.Scan(ctx, op.Key, op.ScanLength, op.Fields)
		return err
	case OpReadModifyWrite:
		if _, err := db.Read(ctx, op.Key, op.Fields); err != nil {
			return err
		}
		return db.Update(ctx, op.Key, op.Values)
	case OpMultiRead:
		recs, err := db.MultiRead(ctx, op.Keys, op.Fields)
		if err == nil && len(recs) != len(op.Keys) {
			err = fmt.Errorf("%w: %d for %d keys", ErrShortBatch, len(recs), len(op.Keys))
		}
		return err
	case OpMultiUpdate:
		return db.MultiUpdate(ctx, op.Keys, op.Batch)
	}
	return fmt.Errorf("ycsb: unknown operation %v", op.Type)
}
