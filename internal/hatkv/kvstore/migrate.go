package kvstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// migrateBatch bounds the records one migration transaction visits, so
// that a large store is converted in steps (an LMDB write transaction
// holds its dirty pages in memory) and a crash loses at most one step.
const migrateBatch = 1000

// migrateFault, when set (tests), runs before each migration step's
// commit and fails it with the error it returns: a crash mid-migration.
var migrateFault func(step int) error

// migrate rewrites every record of a store of format from in the current
// layout, migrateBatch records per transaction, and records the new
// format in the identity with the last step. Until then the identity
// keeps the old format and the data mixes both layouts, which every read
// understands; opening the store again resumes where it stopped. It
// returns how many records it rewrote.
func (s *Store) migrate(ctx context.Context, from int) (int, error) {
	if from != recordV1 {
		return 0, fmt.Errorf("kvstore: no migration from format %d", from)
	}
	var after []byte // the last key visited by the previous step
	total := 0
	for step, done := 0, false; !done; step++ {
		err := s.env.Update(ctx, func(txn *lmdb.Txn) error {
			type conv struct{ k, v []byte }
			var batch []conv
			cur, err := txn.OpenCursor(s.data)
			if err != nil {
				return err
			}
			var k, v []byte
			if after == nil {
				k, v, err = cur.Get(nil, lmdb.First)
			} else if k, v, err = cur.Get(after, lmdb.SetRange); err == nil && bytes.Equal(k, after) {
				k, v, err = cur.Get(nil, lmdb.Next)
			}
			visited := 0
			var last []byte
			for ; err == nil && visited < migrateBatch; k, v, err = cur.Get(nil, lmdb.Next) {
				visited++
				last = k
				if len(v) > 0 && v[0] == recordVersion {
					continue // converted by an earlier, interrupted run
				}
				rec, derr := DecodeRecord(v)
				if derr != nil {
					var re *RecordError
					if errors.As(derr, &re) {
						re.Key = string(k)
					}
					cur.Close()
					return derr
				}
				batch = append(batch, conv{bytes.Clone(k), EncodeRecord(rec)})
			}
			last = bytes.Clone(last) // cursor memory ends with the step
			cur.Close()
			switch {
			case errors.Is(err, lmdb.ErrNotFound):
				done = true
			case err != nil:
				return err
			}
			for _, c := range batch {
				if err := txn.Put(s.data, c.k, c.v, 0); err != nil {
					return err
				}
			}
			if done {
				if err := txn.Put(s.meta, []byte(identityKey), identityValue(), 0); err != nil {
					return err
				}
			}
			if migrateFault != nil {
				if err := migrateFault(step); err != nil {
					return err
				}
			}
			if last != nil {
				after = last
			}
			total += len(batch)
			return nil
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// markerVersion is the format the marker file names (0 when unreadable).
func markerVersion(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), "\n")
	v, _ := strings.CutPrefix(strings.TrimSpace(rest), "format ")
	n, _ := strconv.Atoi(strings.TrimSpace(v))
	return n
}
