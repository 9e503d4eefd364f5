package kvstore

import (
	"context"
	"errors"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// The *Wire reads return records in their wire form (a Thrift binary
// map<string, binary>, see AppendWire) copied straight from LMDB's pages:
// no Record map is built and nothing is encoded again, so a server
// splices them into its replies.

func (s *Store) wireIn(txn *lmdb.Txn, key string, fields []string, dst []byte) ([]byte, error) {
	v, err := txn.GetView(s.data, keyBytes(key))
	if errors.Is(err, lmdb.ErrNotFound) {
		return dst, ErrNotFound
	}
	if err != nil {
		return dst, err
	}
	out, err := AppendWire(dst, v, fields)
	if err != nil {
		var re *RecordError
		if errors.As(err, &re) {
			re.Key = key
		}
	}
	return out, err
}

// GetWire appends the record under key, in wire form and restricted to
// fields when given, to dst. A missing key yields ErrNotFound.
func (s *Store) GetWire(ctx context.Context, key string, fields []string, dst []byte) ([]byte, error) {
	if err := s.checkKey(key); err != nil {
		return dst, err
	}
	s.counters.gets.Add(1)
	out := dst
	err := s.read(ctx, func(txn *lmdb.Txn) error {
		var err error
		out, err = s.wireIn(txn, key, fields, dst)
		return err
	})
	if err != nil {
		return dst, err
	}
	return out, nil
}

// MultiGetWire reads several keys from one snapshot into one buffer and
// returns one wire-form record per key, nil for a missing key.
func (s *Store) MultiGetWire(ctx context.Context, keys []string, fields []string) ([][]byte, error) {
	if err := s.checkBatch(len(keys)); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := s.checkKey(k); err != nil {
			return nil, err
		}
	}
	s.counters.gets.Add(uint64(len(keys)))
	ends := make([]int, len(keys))
	var buf []byte
	err := s.read(ctx, func(txn *lmdb.Txn) error {
		buf = buf[:0]
		for i, k := range keys {
			var err error
			start := len(buf)
			buf, err = s.wireIn(txn, k, fields, buf)
			switch {
			case errors.Is(err, ErrNotFound):
				ends[i] = -1
				continue
			case err != nil:
				return err
			}
			ends[i] = len(buf) - start
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Slices are cut once buf no longer grows.
	out := make([][]byte, len(keys))
	p := 0
	for i, n := range ends {
		if n < 0 {
			continue
		}
		out[i] = buf[p : p+n : p+n]
		p += n
	}
	return out, nil
}

// WireKV is a key and its record in wire form, as ScanWire returns them.
type WireKV struct {
	Key  string
	Wire []byte
}

// ScanWire is ScanCut with the records in wire form, in one buffer; the
// bytes counted against Limits.MaxScanBytes are the keys and wire forms.
func (s *Store) ScanWire(ctx context.Context, startKey string, count int, fields []string) ([]WireKV, bool, error) {
	if count < 1 || count > s.cfg.limits.MaxScanCount {
		return nil, false, limitErr(ErrScanTooLong, "scan count", count, s.cfg.limits.MaxScanCount)
	}
	if len(startKey) > s.maxKey {
		return nil, false, limitErr(ErrKeyTooLong, "key length", len(startKey), s.maxKey)
	}
	s.counters.scans.Add(1)
	var (
		keys []string
		ends []int
		buf  []byte
		cut  bool
		size int
		room = roomOf(ctx)
	)
	err := s.read(ctx, func(txn *lmdb.Txn) error {
		keys, ends, buf, cut, size = keys[:0], ends[:0], buf[:0], false, 0
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
		sc := cur.Scanner(count)
		for ; err == nil && len(keys) < count; k, v, err = sc.Next() {
			start := len(buf)
			var werr error
			if buf, werr = AppendWire(buf, v, fields); werr != nil {
				var re *RecordError
				if errors.As(werr, &re) {
					re.Key = string(k)
				}
				return werr
			}
			if size += len(k) + len(buf) - start; (size > s.cfg.limits.MaxScanBytes || !room.fits(size, len(keys)+1)) && len(keys) > 0 {
				buf, cut = buf[:start], true
				break
			}
			keys = append(keys, string(k))
			ends = append(ends, len(buf)-start)
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
	out := make([]WireKV, len(keys))
	p := 0
	for i, n := range ends {
		out[i] = WireKV{Key: keys[i], Wire: buf[p : p+n : p+n]}
		p += n
	}
	return out, cut, nil
}

// wireSize is the size of rec in wire form (AppendWire's): a map header
// and each entry's two length-prefixed strings.
func wireSize(rec Record) int {
	n := 6
	for k, v := range rec {
		n += 8 + len(k) + len(v)
	}
	return n
}
