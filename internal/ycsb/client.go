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

// RunOptions configures Run.
type RunOptions struct {
	// Threads is the number of client goroutines (default 1).
	Threads int
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
	threads := max(opts.Threads, 1)
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
			for ctx.Err() == nil && issued.Add(1) <= total {
				var op Operation
				if opts.Load {
					op = w.NextLoad(r)
				} else {
					op = w.Next(r)
				}
				begin := time.Now()
				err := execute(ctx, db, op)
				m.Record(op.Type.String(), time.Since(begin), err)
				w.Done(op)
			}
		}(t)
	}
	wg.Wait()
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
