package kvstore

import (
	"context"
	"errors"
	"slices"
	"unsafe"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// keyBytes borrows the string's bytes for the duration of an LMDB call;
// LMDB only reads keys and copies them on put.
func keyBytes(k string) []byte {
	return unsafe.Slice(unsafe.StringData(k), len(k))
}

func (s *Store) checkKey(key string) error {
	if key == "" {
		return ErrEmptyKey
	}
	if len(key) > s.maxKey {
		return limitErr(ErrKeyTooLong, "key length", len(key), s.maxKey)
	}
	return nil
}

func (s *Store) checkRecord(r Record) error {
	l := &s.cfg.limits
	if len(r) > l.MaxFields {
		return limitErr(ErrTooManyFields, "field count", len(r), l.MaxFields)
	}
	for name := range r {
		if name == "" {
			return ErrInvalidField
		}
		if len(name) > l.MaxFieldName {
			return limitErr(ErrInvalidField, "field name length", len(name), l.MaxFieldName)
		}
	}
	if n := encodedSize(r); n > l.MaxRecordSize {
		return limitErr(ErrValueTooLarge, "encoded record size", n, l.MaxRecordSize)
	}
	return nil
}

func (s *Store) checkBatch(n int) error {
	if n > s.cfg.limits.MaxBatch {
		return limitErr(ErrBatchTooLarge, "batch size", n, s.cfg.limits.MaxBatch)
	}
	return nil
}

func (s *Store) read(ctx context.Context, fn func(*lmdb.Txn) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	return s.mapErr(s.env.View(ctx, fn))
}

func (s *Store) getIn(txn *lmdb.Txn, key string, fields []string) (Record, error) {
	v, err := txn.GetView(s.data, keyBytes(key))
	if errors.Is(err, lmdb.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	rec, err := DecodeRecord(v, fields...)
	if err != nil {
		var re *RecordError
		if errors.As(err, &re) {
			re.Key = key
		}
		return nil, err
	}
	return rec, nil
}

// Get returns the record under key, restricted to fields when given.
// A missing key yields ErrNotFound.
func (s *Store) Get(ctx context.Context, key string, fields ...string) (Record, error) {
	if err := s.checkKey(key); err != nil {
		return nil, err
	}
	s.counters.gets.Add(1)
	var rec Record
	err := s.read(ctx, func(txn *lmdb.Txn) error {
		var err error
		rec, err = s.getIn(txn, key, fields)
		return err
	})
	return rec, err
}

// MultiGet reads several keys from one consistent snapshot. The result
// has one entry per key; a missing key gives a nil record.
func (s *Store) MultiGet(ctx context.Context, keys []string, fields ...string) ([]Record, error) {
	if err := s.checkBatch(len(keys)); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := s.checkKey(k); err != nil {
			return nil, err
		}
	}
	s.counters.gets.Add(uint64(len(keys)))
	out := make([]Record, len(keys))
	err := s.read(ctx, func(txn *lmdb.Txn) error {
		for i, k := range keys {
			rec, err := s.getIn(txn, k, fields)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out[i] = rec
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Scan returns up to count records with keys >= startKey, in key order,
// fewer when they would pass Limits.MaxScanBytes (see ScanCut).
func (s *Store) Scan(ctx context.Context, startKey string, count int, fields ...string) ([]KV, error) {
	kvs, _, err := s.ScanCut(ctx, startKey, count, fields...)
	return kvs, err
}

// ScanCut is Scan also reporting whether it stopped before count records
// because the next record would take the keys and records returned past
// Limits.MaxScanBytes, or past the room ctx's ScanRoom gave (the keys
// after the last one returned were not looked at, whether or not there
// are any).
func (s *Store) ScanCut(ctx context.Context, startKey string, count int, fields ...string) ([]KV, bool, error) {
	if count < 1 || count > s.cfg.limits.MaxScanCount {
		return nil, false, limitErr(ErrScanTooLong, "scan count", count, s.cfg.limits.MaxScanCount)
	}
	if len(startKey) > s.maxKey {
		return nil, false, limitErr(ErrKeyTooLong, "key length", len(startKey), s.maxKey)
	}
	s.counters.scans.Add(1)
	var (
		out   []KV
		cut   bool
		bytes int
		room  = roomOf(ctx)
	)
	err := s.read(ctx, func(txn *lmdb.Txn) error {
		cur, err := txn.OpenCursor(s.data)
		if err != nil {
			return err
		}
		defer cur.Close()
		var k, v []byte
		if startKey == "" {
			k, v, err = cur.Get(nil, lmdb.First)
		} else {
			k, v, err = cur.Get(keyBytes(startKey), lmdb.SetRange)
		}
		out, cut, bytes = make([]KV, 0, min(count, 128)), false, 0
		sc := cur.Scanner(count)
		for ; err == nil && len(out) < count; k, v, err = sc.Next() {
			rec, derr := DecodeRecord(v, fields...)
			if derr != nil {
				var re *RecordError
				if errors.As(derr, &re) {
					re.Key = string(k)
				}
				return derr
			}
			if bytes += len(k) + wireSize(rec); (bytes > s.cfg.limits.MaxScanBytes || !room.fits(bytes, len(out)+1)) && len(out) > 0 {
				cut = true
				break
			}
			out = append(out, KV{Key: string(k), Record: rec})
			if err = ctx.Err(); err != nil {
				return err
			}
		}
		if errors.Is(err, lmdb.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, cut, nil
}

// Put merges fields into the record under key (YCSB update), creating the
// record if it does not exist. It returns once the write is committed.
func (s *Store) Put(ctx context.Context, key string, fields Record) error {
	if err := s.checkKey(key); err != nil {
		return err
	}
	if err := s.checkRecord(fields); err != nil {
		return err
	}
	s.counters.puts.Add(1)
	return s.write(ctx, &writeOp{kind: opMerge, kvs: []KV{{Key: key, Record: fields}}})
}

// Insert stores rec under key, replacing any existing record (YCSB insert).
func (s *Store) Insert(ctx context.Context, key string, rec Record) error {
	if err := s.checkKey(key); err != nil {
		return err
	}
	if err := s.checkRecord(rec); err != nil {
		return err
	}
	s.counters.puts.Add(1)
	return s.write(ctx, &writeOp{kind: opReplace, kvs: []KV{{Key: key, Record: rec}}})
}

// MultiPut merges several records atomically: all of them are committed
// together or none is.
func (s *Store) MultiPut(ctx context.Context, kvs []KV) error {
	if err := s.checkBatch(len(kvs)); err != nil {
		return err
	}
	for _, kv := range kvs {
		if err := s.checkKey(kv.Key); err != nil {
			return err
		}
		if err := s.checkRecord(kv.Record); err != nil {
			return err
		}
	}
	if len(kvs) == 0 {
		return nil
	}
	s.counters.puts.Add(uint64(len(kvs)))
	return s.write(ctx, &writeOp{kind: opMerge, kvs: slices.Clone(kvs)})
}

// Delete removes key; a missing key yields ErrNotFound.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.checkKey(key); err != nil {
		return err
	}
	s.counters.deletes.Add(1)
	return s.write(ctx, &writeOp{kind: opDelete, kvs: []KV{{Key: key}}})
}
