package kvstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// ErrBackupTarget means a backup was asked into a directory that is not
// missing or empty; nothing is written then.
var ErrBackupTarget = errors.New("kvstore: backup target must be a missing or empty directory")

// Check verifies the store in dir without opening it with LMDB: the data
// directory rules, then lmdb.Verify over every page with every record
// decoded and the identity compared. Damage is listed in the report; the
// error is non-nil when dir is not a hatkv directory or data.mdb cannot be
// walked at all (damaged meta pages, truncation: *OpenError matching
// ErrCorruptData). It only reads, so it may run beside a server; then
// Report.Changed says whether a write landed during the walk.
func Check(ctx context.Context, dir string, opts ...lmdb.VerifyOption) (*lmdb.Report, error) {
	if _, err := prepareDir(ctx, dir, true, verifyNone); err != nil {
		return nil, err
	}
	opts = append([]lmdb.VerifyOption{lmdb.WithRecordCheck(checkRecord)}, opts...)
	rep, err := lmdb.Verify(ctx, filepath.Join(dir, dataFile), opts...)
	if err != nil {
		return nil, corruptErr(dir, err)
	}
	found := map[string]bool{}
	for _, t := range rep.Trees {
		found[t.Name] = true
	}
	for _, n := range []string{metaDBName, dataDBName} {
		if !found[n] {
			rep.Problems = append(rep.Problems, lmdb.Problem{Tree: n, Msg: "missing: not a hatkv store, or its main tree is damaged"})
		}
	}
	return rep, nil
}

// Backup writes a compacted copy of the store (mdb_env_copyfd2 with
// MDB_CP_COMPACT, in one read transaction: consistent while writes go
// on) into dir, which must be missing or empty, marks it as a hatkv data
// directory, and verifies the copy as Check does. The copy is a complete
// data directory: serve it with `--db dir`, or restore it by putting it in
// place of the store's directory while no server runs.
func (s *Store) Backup(ctx context.Context, dir string) (_ *lmdb.Report, err error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	created, err := backupTarget(dir)
	if err != nil {
		return nil, err
	}
	var wrote bool
	defer func() {
		if err == nil {
			return
		}
		// Remove only what this call created; the target was empty.
		if wrote {
			_ = os.Remove(filepath.Join(dir, dataFile))
			_ = os.Remove(filepath.Join(dir, MarkerFile))
		}
		if created {
			_ = os.Remove(dir)
		}
	}()
	if err := s.env.Copy(ctx, dir, true); err != nil {
		return nil, fmt.Errorf("kvstore: backup to %s: %w", dir, err)
	}
	wrote = true
	if err := syncFile(filepath.Join(dir, dataFile)); err != nil {
		return nil, fmt.Errorf("kvstore: backup to %s: %w", dir, err)
	}
	if err := writeMarker(dir); err != nil {
		return nil, fmt.Errorf("kvstore: backup to %s: %w", dir, err)
	}
	rep, err := Check(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("kvstore: verifying the backup in %s: %w", dir, err)
	}
	if !rep.OK() {
		return rep, fmt.Errorf("kvstore: the backup in %s failed verification: %v", dir, rep.Problems[0])
	}
	return rep, nil
}

// backupTarget creates dir or checks that it is an empty directory.
func backupTarget(dir string) (created bool, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o755); err != nil {
			return false, fmt.Errorf("kvstore: backup: %w", err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("kvstore: backup: %w", err)
	case !fi.IsDir():
		return false, fmt.Errorf("%w: %s is a file", ErrBackupTarget, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("kvstore: backup: %w", err)
	}
	if len(entries) > 0 {
		return false, fmt.Errorf("%w: %s holds %s", ErrBackupTarget, dir, entries[0].Name())
	}
	return false, nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
