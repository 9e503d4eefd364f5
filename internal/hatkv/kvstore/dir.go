package kvstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// MarkerFile is the file that makes a directory a hatkv data directory.
// It holds markerHeader and the format version, so that hatkv never adopts
// (and LMDB never writes into) a directory that belongs to someone else.
const MarkerFile = "hatkv-format"

const markerHeader = "hatkv data directory"

func markerContent() []byte {
	return fmt.Appendf(nil, "%s\nformat %d\n", markerHeader, FormatVersion)
}

// The files LMDB keeps in a data directory.
const (
	dataFile = "data.mdb"
	lockFile = "lock.mdb"
)

// dirState is what prepareDir found.
type dirState int

const (
	dirFresh   dirState = iota // empty or just created: LMDB creates the files
	dirMarked                  // has the marker and data.mdb
	dirAdopted                 // data.mdb (+ lock.mdb) without the marker: hatkv before markers
)

// VerifyLevel says how much of data.mdb Open checks before LMDB maps it.
type VerifyLevel int

const (
	// VerifyFull walks every page and decodes every record (lmdb.Verify):
	// any damage LMDB could trip over later is refused at open. It reads
	// the whole used part of the file once.
	VerifyFull VerifyLevel = iota
	// VerifyMeta checks the meta pages and that the file holds every page
	// they reference (no walk): a truncated or foreign file is refused, a
	// damaged page inside is not.
	VerifyMeta
	// verifyNone leaves data.mdb to the caller (Check walks it itself).
	verifyNone
)

// ParseVerifyLevel parses "full" or "meta".
func ParseVerifyLevel(s string) (VerifyLevel, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "full", "":
		return VerifyFull, nil
	case "meta":
		return VerifyMeta, nil
	}
	return 0, fmt.Errorf("kvstore: unknown verify level %q (want full|meta)", s)
}

func (v VerifyLevel) String() string {
	if v == VerifyMeta {
		return "meta"
	}
	return "full"
}

// prepareDir applies the data directory rules: a missing directory is
// created (unless readOnly); an empty one is fresh; one with the marker
// must hold data.mdb; one without the marker is adopted only if it holds
// nothing but LMDB's two files. Everything else is refused, and nothing
// existing is written to before data.mdb and lock.mdb have been checked.
func prepareDir(ctx context.Context, path string, readOnly bool, level VerifyLevel) (dirState, error) {
	refuse := func(sentinel error, format string, args ...any) (dirState, error) {
		return 0, &OpenError{Path: path, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !readOnly:
		if err := os.MkdirAll(path, 0o755); err != nil {
			return 0, &OpenError{Path: path, Err: err}
		}
		return dirFresh, nil
	case err != nil:
		return 0, &OpenError{Path: path, Err: err}
	case !fi.IsDir():
		return refuse(ErrForeignData, "path is a file, not a directory")
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return 0, &OpenError{Path: path, Err: err}
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	has := func(n string) bool { return slices.Contains(names, n) }
	state := dirFresh
	switch {
	case has(MarkerFile):
		if err := readMarker(path); err != nil {
			return 0, err
		}
		if !has(dataFile) {
			return refuse(ErrCorruptData, "%s is missing although %s says this is a hatkv directory: restore a backup (see `hatkv backup`), or remove %s to start an empty store",
				dataFile, MarkerFile, MarkerFile)
		}
		state = dirMarked
	case len(names) == 0:
		if readOnly {
			return refuse(ErrForeignData, "empty directory, no store to open")
		}
		return dirFresh, nil
	default:
		var foreign []string
		for _, n := range names {
			if n != dataFile && n != lockFile && n != MarkerFile+".tmp" {
				foreign = append(foreign, n)
			}
		}
		if len(foreign) > 0 || !has(dataFile) {
			if len(foreign) > 5 {
				foreign = append(foreign[:5], "...")
			}
			if len(foreign) == 0 {
				foreign = names
			}
			return refuse(ErrForeignData, "directory holds %s and no %s: hatkv uses an empty directory or one it created", strings.Join(foreign, ", "), MarkerFile)
		}
		state = dirAdopted
	}
	if err := checkFiles(ctx, path, level); err != nil {
		return 0, err
	}
	return state, nil
}

// checkFiles checks lock.mdb and data.mdb before LMDB touches them.
func checkFiles(ctx context.Context, path string, level VerifyLevel) error {
	if err := lmdb.CheckLockFile(filepath.Join(path, lockFile)); err != nil {
		return &OpenError{Path: path, Err: ErrForeignData, Detail: "lock.mdb is not LMDB's lock file", Cause: err}
	}
	data := filepath.Join(path, dataFile)
	fi, err := os.Lstat(data)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &OpenError{Path: path, Err: err}
	case !fi.Mode().IsRegular():
		return &OpenError{Path: path, Err: ErrForeignData, Detail: "data.mdb is not a regular file"}
	}
	if level == verifyNone {
		return nil
	}
	if level == VerifyMeta {
		if _, err := lmdb.ReadMeta(data); err != nil {
			return corruptErr(path, err)
		}
		return nil
	}
	rep, err := lmdb.Verify(ctx, data, lmdb.WithMaxProblems(3), lmdb.WithRecordCheck(checkDataRecord))
	if err != nil {
		return corruptErr(path, err)
	}
	if len(rep.Problems) > 0 {
		var ps []string
		for _, p := range rep.Problems {
			ps = append(ps, p.String())
		}
		n := len(rep.Problems) + rep.MoreProblems
		return &OpenError{Path: path, Err: ErrCorruptData,
			Detail: fmt.Sprintf("%d problem(s) in data.mdb, e.g. %s; `hatkv check --db %s` lists them, restore a backup", n, strings.Join(ps, "; "), path)}
	}
	return nil
}

func corruptErr(path string, err error) error {
	if errors.Is(err, lmdb.ErrDamaged) {
		return &OpenError{Path: path, Err: ErrCorruptData, Cause: err}
	}
	return &OpenError{Path: path, Err: err}
}

// checkDataRecord decodes every record at open; the identity and the
// trees present are judged by checkIdentity once LMDB has opened the file,
// with the errors that say "not hatkv's" rather than "damaged".
func checkDataRecord(tree string, key, val []byte) error {
	if tree != dataDBName {
		return nil
	}
	_, err := DecodeRecord(val)
	return err
}

// checkRecord is `hatkv check`'s record check of hatkv's two trees.
func checkRecord(tree string, key, val []byte) error {
	switch tree {
	case dataDBName:
		_, err := DecodeRecord(val)
		return err
	case metaDBName:
		if string(key) == identityKey && !validIdentity(val) {
			return fmt.Errorf("identity record %q, want %q (or an older format's)", val, identityValue())
		}
		return nil
	}
	return fmt.Errorf("tree %q is not part of a hatkv store", tree)
}

// validIdentity accepts the identity of every format this build reads.
func validIdentity(val []byte) bool {
	if len(val) != len(identityMagic)+2 || string(val[:len(identityMagic)]) != string(identityMagic) {
		return false
	}
	v := int(val[len(identityMagic)])
	return v >= 1 && v <= FormatVersion && val[len(identityMagic)+1] == byte(min(v, recordVersion))
}

func readMarker(path string) error {
	b, err := os.ReadFile(filepath.Join(path, MarkerFile))
	if err != nil {
		return &OpenError{Path: path, Err: err}
	}
	head, rest, _ := strings.Cut(string(b), "\n")
	v, ok := strings.CutPrefix(strings.TrimSpace(rest), "format ")
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if head != markerHeader || !ok || err != nil {
		return &OpenError{Path: path, Err: ErrForeignData, Detail: fmt.Sprintf("%s is not hatkv's marker file", MarkerFile)}
	}
	if n > FormatVersion || n < 1 {
		return &OpenError{Path: path, Err: ErrUnsupportedVersion, Detail: newerFormat(MarkerFile, n)}
	}
	return nil
}

// writeMarker creates the marker atomically (a crash leaves either no
// marker, which the adoption rule handles, or a complete one).
func writeMarker(dir string) error {
	tmp := filepath.Join(dir, MarkerFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(markerContent()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, MarkerFile)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
