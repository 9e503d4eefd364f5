package kvstore

import (
	"context"
	"errors"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

type opKind int

const (
	opMerge opKind = iota
	opReplace
	opDelete
)

// writeOp is one caller's write. Its result is err, published by closing
// done (group commit) or set synchronously (immediate commit).
type writeOp struct {
	kind opKind
	kvs  []KV
	ctx  context.Context
	err  error
	done chan struct{}
}

// apply performs op inside txn. Errors that concern only this op (a
// missing key on delete, a corrupt or oversized merged record) are
// returned as local and leave the transaction untouched, because every
// check runs before the first mutation; errors from LMDB writes are fatal
// to the whole transaction.
func (op *writeOp) apply(txn *lmdb.Txn, s *Store) (local, fatal error) {
	if op.kind == opDelete {
		err := txn.Del(s.data, keyBytes(op.kvs[0].Key))
		if errors.Is(err, lmdb.ErrNotFound) {
			return ErrNotFound, nil
		}
		return nil, err
	}
	vals := make([][]byte, len(op.kvs))
	if op.kind == opReplace {
		vals[0] = EncodeRecord(op.kvs[0].Record)
	} else {
		// A key repeated within one MultiPut merges onto its earlier
		// version in this op, which the database does not hold yet.
		pending := make(map[string]Record, len(op.kvs))
		for i, kv := range op.kvs {
			base, ok := pending[kv.Key]
			if !ok {
				v, err := txn.GetView(s.data, keyBytes(kv.Key))
				switch {
				case err == nil:
					if base, err = DecodeRecord(v); err != nil {
						var re *RecordError
						if errors.As(err, &re) {
							re.Key = kv.Key
						}
						return err, nil
					}
				case errors.Is(err, lmdb.ErrNotFound):
					base = make(Record, len(kv.Record))
				default:
					return nil, err
				}
			}
			for f, val := range kv.Record {
				base[f] = val
			}
			if err := s.checkRecord(base); err != nil {
				return err, nil
			}
			pending[kv.Key] = base
			vals[i] = EncodeRecord(base)
		}
	}
	for i, kv := range op.kvs {
		if err := txn.Put(s.data, keyBytes(kv.Key), vals[i], 0); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// cloneRecord copies r into fresh memory (one buffer for all values).
func cloneRecord(r Record) Record {
	if r == nil {
		return nil
	}
	n := 0
	for _, v := range r {
		n += len(v)
	}
	buf := make([]byte, 0, n)
	c := make(Record, len(r))
	for f, v := range r {
		start := len(buf)
		buf = append(buf, v...)
		c[f] = buf[start:len(buf):len(buf)]
	}
	return c
}

func (s *Store) write(ctx context.Context, op *writeOp) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	op.ctx = ctx
	if s.committer != nil {
		// The committer may still read a queued op after its caller gave
		// up on a cancelled context, so it gets a private copy of the data.
		for i := range op.kvs {
			op.kvs[i].Record = cloneRecord(op.kvs[i].Record)
		}
		return s.committer.submit(ctx, op)
	}
	s.commitOps(ctx, []*writeOp{op}, false)
	return op.err
}

// commitOps runs ops in one write transaction and records each op's
// result. When the map is full a batch is retried op by op, so that one
// large write does not fail its neighbours and deletes can still free
// space.
func (s *Store) commitOps(ctx context.Context, ops []*writeOp, retried bool) {
	err := s.env.Update(ctx, func(txn *lmdb.Txn) error {
		for _, op := range ops {
			if err := op.ctx.Err(); err != nil {
				op.err = err
				continue
			}
			local, fatal := op.apply(txn, s)
			if fatal != nil {
				return fatal
			}
			op.err = local
		}
		return nil
	})
	if err == nil {
		if s.fullDisk.Load() && s.fullDisk.CompareAndSwap(true, false) {
			s.cfg.log.Info("kvstore: writes succeed again after the disk was full", "path", s.path)
		}
		c := &s.counters
		c.commits.Add(1)
		c.batchedWrites.Add(uint64(len(ops)))
		for n := uint64(len(ops)); ; {
			cur := c.maxBatch.Load()
			if n <= cur || c.maxBatch.CompareAndSwap(cur, n) {
				break
			}
		}
		return
	}
	if errors.Is(err, lmdb.ErrMapFull) {
		if len(ops) > 1 {
			for _, op := range ops {
				s.commitOps(ctx, []*writeOp{op}, retried)
			}
			return
		}
		if !retried && ops[0].kind == opDelete && s.growForDelete(ctx) {
			s.commitOps(ctx, ops, true)
			return
		}
	}
	err = s.writeErr(err)
	if errors.Is(err, ErrDiskFull) && s.fullDisk.CompareAndSwap(false, true) {
		s.cfg.log.Error("kvstore: disk full: writes are refused until space is freed; reads go on", "path", s.path, "err", err)
	}
	for _, op := range ops {
		op.err = err
	}
}

// committer is the single goroutine that turns queued writes into group
// commits. Callers are released only after the transaction holding their
// write has committed (or failed, in which case they all get its error).
type committer struct {
	s        *Store
	reqs     chan *writeOp
	quit     chan struct{}
	done     chan struct{}
	maxBatch int
	maxDelay time.Duration
}

func newCommitter(s *Store, maxBatch int, maxDelay time.Duration) *committer {
	c := &committer{
		s:        s,
		reqs:     make(chan *writeOp, maxBatch),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		maxBatch: maxBatch,
		maxDelay: maxDelay,
	}
	go c.run()
	return c
}

func (c *committer) submit(ctx context.Context, op *writeOp) error {
	op.done = make(chan struct{})
	select {
	case c.reqs <- op: // usually room: no need to ask ctx for Done yet
	default:
		select {
		case c.reqs <- op:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		// The write may still commit; the caller only learns that it was
		// not acknowledged.
		return ctx.Err()
	}
}

// stop is called by Close once no operation is in flight, so the queue is
// empty and nobody can submit any more.
func (c *committer) stop() {
	close(c.quit)
	<-c.done
}

func (c *committer) run() {
	defer close(c.done)
	batch := make([]*writeOp, 0, c.maxBatch)
	for {
		select {
		case op := <-c.reqs:
			batch = c.gather(append(batch[:0], op))
		case <-c.quit:
			return
		}
		c.s.commitOps(context.Background(), batch, false)
		for i, op := range batch {
			close(op.done)
			batch[i] = nil
		}
	}
}

// gather takes what is already queued and then, if configured, lingers up
// to maxDelay for more, bounding both batch size and added latency.
func (c *committer) gather(batch []*writeOp) []*writeOp {
	for len(batch) < c.maxBatch {
		select {
		case op := <-c.reqs:
			batch = append(batch, op)
			continue
		default:
		}
		break
	}
	if c.maxDelay <= 0 || len(batch) >= c.maxBatch {
		return batch
	}
	timer := time.NewTimer(c.maxDelay)
	defer timer.Stop()
	for len(batch) < c.maxBatch {
		select {
		case op := <-c.reqs:
			batch = append(batch, op)
		case <-timer.C:
			return batch
		}
	}
	return batch
}
