package kvstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// Batch sizes of a streamed scan (ScanStream). 64 KiB puts 16 messages
// in the RPC stream window's default of 1 MiB per stream, and it spreads
// a batch's fixed costs (a read transaction and a cursor seek, a frame, a
// Send) over about 60 YCSB records of 1 KB. The record cap keeps the
// per-message work bounded when records are tiny.
const (
	StreamBatchBytes   = 64 << 10
	StreamBatchRecords = 1024
)

// ScanRange is what ScanStream reads.
type ScanRange struct {
	Start string // first key (inclusive); "": from the first key
	End   string // last key (exclusive); "": through the last key
	// Fields restricts the records to these fields (none: all).
	Fields []string
	// Limit stops after this many records in all (0: no limit).
	Limit int64
	// BatchRecords caps the records of a batch below StreamBatchRecords
	// (0: StreamBatchRecords).
	BatchRecords int
}

func (s *Store) checkRange(r *ScanRange) error {
	switch {
	case len(r.Start) > s.maxKey:
		return limitErr(ErrKeyTooLong, "start key length", len(r.Start), s.maxKey)
	case len(r.End) > s.maxKey:
		return limitErr(ErrKeyTooLong, "end key length", len(r.End), s.maxKey)
	case r.End != "" && r.End < r.Start:
		return fmt.Errorf("%w: end key %q is before start key %q", ErrBadRange, r.End, r.Start)
	case r.Limit < 0:
		return fmt.Errorf("%w: limit %d is negative (0: no limit)", ErrBadRange, r.Limit)
	case r.BatchRecords < 0:
		return fmt.Errorf("%w: batch of %d records is negative (0: the server's batch)", ErrBadRange, r.BatchRecords)
	}
	return nil
}

// ScanStreamWire reads the records of r in key order and hands them to
// send in batches: a batch ends with the record that takes its keys and
// wire forms to StreamBatchBytes (so it passes that by less than one
// record), or at StreamBatchRecords records. A batch is valid only
// until send returns (its memory is reused), so memory stays at one batch
// however long the range.
//
// Each batch is read in a read transaction of its own, ended before send
// runs: a caller that blocks in send (a client that stopped reading)
// never holds an LMDB reader slot or pins a snapshot, so writers and page
// reuse carry on. The next batch starts after the last key sent. Hence
// the consistency: each batch is one snapshot, the stream is not; every
// key returned once, in increasing order; a key present and unchanged for
// the whole scan is returned; one written or deleted meanwhile is
// returned as one of the snapshots saw it, or not at all — as with paging
// through Scan.
func (s *Store) ScanStreamWire(ctx context.Context, r ScanRange, send func([]WireKV) error) error {
	var (
		buf  []byte
		ends []int
		out  []WireKV
	)
	return s.scanStream(ctx, r, func(k, v []byte) (int, error) {
		start := len(buf)
		var err error
		if buf, err = AppendWire(buf, v, r.Fields); err != nil {
			return 0, err
		}
		out = append(out, WireKV{Key: string(k)})
		ends = append(ends, len(buf)-start)
		return len(k) + len(buf) - start, nil
	}, func() error {
		// Slices are cut once buf no longer grows.
		p := 0
		for i, n := range ends {
			out[i].Wire = buf[p : p+n : p+n]
			p += n
		}
		err := send(out)
		buf, ends, out = buf[:0], ends[:0], out[:0]
		return err
	})
}

// ScanStream is ScanStreamWire with decoded records; a batch's records
// belong to send.
func (s *Store) ScanStream(ctx context.Context, r ScanRange, send func([]KV) error) error {
	var out []KV
	return s.scanStream(ctx, r, func(k, v []byte) (int, error) {
		rec, err := DecodeRecord(v, r.Fields...)
		if err != nil {
			return 0, err
		}
		out = append(out, KV{Key: string(k), Record: rec})
		return len(k) + wireSize(rec), nil
	}, func() error {
		err := send(out)
		out = nil
		return err
	})
}

// scanStream runs the batches: add takes one record (returning its size),
// flush hands the batch on.
func (s *Store) scanStream(ctx context.Context, r ScanRange, add func(k, v []byte) (int, error), flush func() error) error {
	if err := s.checkRange(&r); err != nil {
		return err
	}
	per := StreamBatchRecords
	if r.BatchRecords > 0 {
		per = min(per, r.BatchRecords)
	}
	s.counters.scans.Add(1)
	var (
		last  []byte // the last key sent; the next batch starts after it
		sent  int64
		first = true
	)
	for {
		n, done := 0, false
		err := s.read(ctx, func(txn *lmdb.Txn) error {
			cur, err := txn.OpenCursor(s.data)
			if err != nil {
				return err
			}
			defer cur.Close()
			var k, v []byte
			switch {
			case !first:
				k, v, err = cur.Get(last, lmdb.SetRange)
				if err == nil && bytes.Equal(k, last) {
					k, v, err = cur.Get(nil, lmdb.Next)
				}
			case r.Start == "":
				k, v, err = cur.Get(nil, lmdb.First)
			default:
				k, v, err = cur.Get(keyBytes(r.Start), lmdb.SetRange)
			}
			ahead := per
			if r.Limit > 0 {
				ahead = int(min(int64(ahead), r.Limit-sent))
			}
			sc := cur.Scanner(ahead)
			size := 0
			for ; err == nil; k, v, err = sc.Next() {
				if (r.End != "" && string(k) >= r.End) || (r.Limit > 0 && sent+int64(n) >= r.Limit) {
					done = true
					return nil
				}
				if n == per || (n > 0 && size >= StreamBatchBytes) {
					return nil
				}
				m, aerr := add(k, v)
				if aerr != nil {
					var re *RecordError
					if errors.As(aerr, &re) {
						re.Key = string(k)
					}
					return aerr
				}
				size += m
				n++
				last = append(last[:0], k...)
			}
			if errors.Is(err, lmdb.ErrNotFound) {
				done = true
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		first = false
		if n > 0 {
			sent += int64(n)
			if err := flush(); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// ReadTxns returns the LMDB read transactions open now: a streamed scan
// holds one only while it reads a batch, never while its send blocks.
func (s *Store) ReadTxns() int { return s.env.ReadTxns() }
