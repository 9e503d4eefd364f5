package lmdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
)

// Verify walks every page of the data file at path in Go, without LMDB:
// both meta pages, then every tree (the free-page tree, the main tree and
// each named database in it), every node of every page and every
// overflow value, checking headers, bounds, key order, depth and the page
// and entry counts the tree roots record, and that no page is used twice.
//
// Why in Go rather than through LMDB (even in a child process): LMDB
// validates nothing it reads, so a damaged page either crashes it — which
// a child process would turn into a report, but only for the first
// damage, with no page number — or, worse, is read silently (garbage that
// happens to parse loses records without any error). Reading the file
// with pread never faults, even on a file truncated under us, and every
// inconsistency is reported with its page.
//
// Damage is reported in Report.Problems; the error is non-nil only when
// the file cannot be judged at all: a *FileError (errors.Is ErrDamaged)
// when the meta pages are unusable, or an I/O or context error. The walk
// sees a consistent snapshot only while no process writes the
// environment; Report.Changed says a write was committed meanwhile.
func Verify(ctx context.Context, path string, opts ...VerifyOption) (rep *Report, err error) {
	cfg := verifyConfig{maxProblems: 100}
	for _, o := range opts {
		o(&cfg)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := readMeta(f, path)
	if err != nil {
		return nil, err
	}
	w := &walker{ctx: ctx, f: f, m: m, psize: int(m.PageSize), cfg: cfg,
		state: make([]byte, m.LastPage+1), rep: &Report{Meta: m}}
	w.state[0], w.state[1] = stateUsed, stateUsed
	defer func() {
		// The walker checks every bound before it indexes; a panic here is
		// a bug in it, reported as such rather than taking the caller down.
		if r := recover(); r != nil {
			w.problem("", 0, "checker failure (please report): %v", r)
			rep, err = w.rep, nil
		}
	}()
	if err := w.walk(); err != nil {
		return nil, err
	}
	if after, err := readMeta(f, path); err != nil || after.TxnID != m.TxnID {
		w.rep.Changed = true
	}
	return w.rep, nil
}

// VerifyOption configures Verify.
type VerifyOption func(*verifyConfig)

type verifyConfig struct {
	maxProblems int
	record      func(db string, key, val []byte) error
}

// WithRecordCheck calls fn for every record of every named database (key
// and value are only valid during the call); an error is reported as a
// problem of that record.
func WithRecordCheck(fn func(db string, key, val []byte) error) VerifyOption {
	return func(c *verifyConfig) { c.record = fn }
}

// WithMaxProblems caps the problems listed (default 100); the rest are
// counted in Report.MoreProblems.
func WithMaxProblems(n int) VerifyOption { return func(c *verifyConfig) { c.maxProblems = max(n, 1) } }

// Problem is one inconsistency found by Verify.
type Problem struct {
	Tree string // "" when about the file as a whole
	Page uint64 // 0 when not about one page
	Msg  string
}

func (p Problem) String() string {
	s := ""
	if p.Tree != "" {
		s = "tree " + p.Tree + ": "
	}
	if p.Page != 0 {
		s += fmt.Sprintf("page %d: ", p.Page)
	}
	return s + p.Msg
}

// TreeReport compares what a tree's root record says with what the walk
// found.
type TreeReport struct {
	Name string
	Want DBInfo
	// Found counts: entries, branch, leaf and overflow pages.
	Entries, BranchPages, LeafPages, OverflowPages uint64
}

// Report is the outcome of Verify.
type Report struct {
	Meta  Meta
	Trees []TreeReport
	// FreePages are listed in the free-page tree; Unaccounted pages are
	// neither free nor used (leaked by a crash: wasted space, not damage).
	FreePages, Unaccounted uint64
	Problems               []Problem
	MoreProblems           int
	// Changed: a write was committed during the walk, so it did not see
	// one snapshot; check a stopped store or a backup.
	Changed bool
}

// OK reports whether the walk found no damage and saw one snapshot.
func (r *Report) OK() bool { return len(r.Problems) == 0 && !r.Changed }

const (
	stateNone = iota
	stateUsed
	stateFree
)

var stateNames = [...]string{stateNone: "unused", stateUsed: "in use", stateFree: "listed free"}

// Names Verify gives the two core trees.
const (
	FreeTree = "(free pages)"
	MainTree = "(main)"
)

type walker struct {
	ctx   context.Context
	f     *os.File
	m     Meta
	psize int
	cfg   verifyConfig
	state []byte // per page: stateNone, stateUsed or stateFree
	pages [maxDepth + 1][]byte
	n     int // pages read, for the periodic context check
	rep   *Report
	named []namedTree
}

type namedTree struct {
	name string
	db   DBInfo
}

type tree struct {
	rep     TreeReport
	intKeys bool
	free    bool // values are page lists to mark free
	main    bool // F_SUBDATA values are named trees
}

func (w *walker) problem(tree string, pg uint64, format string, args ...any) {
	if len(w.rep.Problems) >= w.cfg.maxProblems {
		w.rep.MoreProblems++
		return
	}
	w.rep.Problems = append(w.rep.Problems, Problem{Tree: tree, Page: pg, Msg: fmt.Sprintf(format, args...)})
}

func (w *walker) walk() error {
	trees := []struct {
		t  *tree
		db DBInfo
	}{
		{&tree{rep: TreeReport{Name: FreeTree}, intKeys: true, free: true}, w.m.Free},
		{&tree{rep: TreeReport{Name: MainTree}, main: true}, w.m.Main},
	}
	for _, tr := range trees {
		if err := w.walkTree(tr.t, tr.db); err != nil {
			return err
		}
	}
	for i := 0; i < len(w.named); i++ {
		nt := w.named[i]
		t := &tree{rep: TreeReport{Name: nt.name}, intKeys: nt.db.Flags&dbIntegerKey != 0}
		if err := w.walkTree(t, nt.db); err != nil {
			return err
		}
	}
	for _, s := range w.state {
		switch s {
		case stateFree:
			w.rep.FreePages++
		case stateNone:
			w.rep.Unaccounted++
		}
	}
	return nil
}

func (w *walker) walkTree(t *tree, db DBInfo) error {
	t.rep.Want = db
	defer func() { w.rep.Trees = append(w.rep.Trees, t.rep) }()
	name := t.rep.Name
	if db.Root == invalidPgno {
		if db.Entries != 0 || db.Depth != 0 {
			w.problem(name, 0, "empty tree records %d entries at depth %d", db.Entries, db.Depth)
		}
		return nil
	}
	switch {
	case db.Depth == 0 || db.Depth > maxDepth:
		w.problem(name, 0, "implausible depth %d", db.Depth)
		return nil
	case db.Flags&dbDupSort != 0:
		w.problem(name, 0, "duplicate-key (MDB_DUPSORT) trees are not supported by this checker")
		return nil
	case db.Root < numMetas || db.Root > w.m.LastPage:
		w.problem(name, 0, "root page %d outside pages 2..%d", db.Root, w.m.LastPage)
		return nil
	}
	if err := w.walkPage(t, db.Root, 1, int(db.Depth), nil, nil); err != nil {
		return err
	}
	r := &t.rep
	for _, c := range []struct {
		what        string
		want, found uint64
	}{
		{"entries", db.Entries, r.Entries}, {"branch pages", db.BranchPages, r.BranchPages},
		{"leaf pages", db.LeafPages, r.LeafPages}, {"overflow pages", db.OverflowPages, r.OverflowPages},
	} {
		if c.want != c.found {
			w.problem(name, 0, "root record says %d %s, the walk found %d", c.want, c.what, c.found)
		}
	}
	return nil
}

// claim marks pages [pg, pg+n) as in state s, reporting pages outside
// the file or already claimed; it returns false if any was.
func (w *walker) claim(tree string, pg, n uint64, s byte) bool {
	if pg < numMetas || pg > w.m.LastPage || n > w.m.LastPage-pg+1 {
		w.problem(tree, pg, "page range %d..%d outside pages 2..%d", pg, pg+n-1, w.m.LastPage)
		return false
	}
	ok := true
	for p := pg; p < pg+n; p++ {
		if old := w.state[p]; old != stateNone {
			w.problem(tree, p, "page is %s but already %s", stateNames[s], stateNames[old])
			ok = false
			continue
		}
		w.state[p] = s
	}
	return ok
}

func (w *walker) read(buf []byte, off int64) error {
	if w.n++; w.n%1024 == 0 {
		if err := w.ctx.Err(); err != nil {
			return err
		}
	}
	_, err := w.f.ReadAt(buf, off)
	return err
}

// walkPage checks page pg at level (1 = root) of a tree of the given
// depth; every key in it must lie in [lo, hi) (nil: unbounded).
func (w *walker) walkPage(t *tree, pg uint64, level, depth int, lo, hi []byte) error {
	name := t.rep.Name
	if !w.claim(name, pg, 1, stateUsed) {
		return nil
	}
	if w.pages[level] == nil {
		w.pages[level] = make([]byte, w.psize)
	}
	p := w.pages[level]
	if err := w.read(p, int64(pg)*int64(w.psize)); err != nil {
		return fmt.Errorf("%s: reading page %d: %w", w.f.Name(), pg, err)
	}
	le := binary.LittleEndian
	flags := le.Uint16(p[10:])
	lower, upper := int(le.Uint16(p[12:])), int(le.Uint16(p[14:]))
	leaf := level == depth
	switch {
	case le.Uint64(p) != pg:
		w.problem(name, pg, "page header says page %d (garbage or misplaced page)", le.Uint64(p))
		return nil
	case leaf && flags&(pLeaf|pBranch|pOverflow|pMeta|pLeaf2) != pLeaf:
		w.problem(name, pg, "expected a leaf page at level %d of %d, page flags %#x", level, depth, flags)
		return nil
	case !leaf && flags&(pLeaf|pBranch|pOverflow|pMeta|pLeaf2) != pBranch:
		w.problem(name, pg, "expected a branch page at level %d of %d, page flags %#x", level, depth, flags)
		return nil
	case lower < pageHeaderSize || lower > upper || upper > w.psize || (lower-pageHeaderSize)%2 != 0:
		w.problem(name, pg, "bad free-space bounds lower=%d upper=%d", lower, upper)
		return nil
	}
	nkeys := (lower - pageHeaderSize) / 2
	if nkeys == 0 {
		w.problem(name, pg, "page has no entries")
		return nil
	}
	if leaf {
		t.rep.LeafPages++
	} else {
		t.rep.BranchPages++
	}
	var prev []byte
	for i := range nkeys {
		off := int(le.Uint16(p[pageHeaderSize+2*i:]))
		if off < upper || off+nodeHeaderSize > w.psize {
			w.problem(name, pg, "entry %d at offset %d outside the page's node area %d..%d", i, off, upper, w.psize)
			return nil
		}
		node := p[off:]
		nlo, nhi := uint64(le.Uint16(node)), uint64(le.Uint16(node[2:]))
		nflags, ksize := le.Uint16(node[4:]), int(le.Uint16(node[6:]))
		if off+nodeHeaderSize+ksize > w.psize {
			w.problem(name, pg, "entry %d: key of %d bytes runs past the page", i, ksize)
			return nil
		}
		key := node[nodeHeaderSize : nodeHeaderSize+ksize]
		// A branch page's first key is implicit (LMDB stores it empty).
		if leaf || i > 0 {
			if msg := w.keyOrder(t, key, prev, lo, hi); msg != "" {
				w.problem(name, pg, "entry %d: %s", i, msg)
				return nil
			}
			prev = key
		}
		if !leaf {
			child := nlo | nhi<<16 | uint64(nflags)<<32
			clo, chi := lo, hi
			if i > 0 {
				clo = key
			}
			if i+1 < nkeys {
				// The next key bounds this child; it is checked for
				// bounds and order when the loop reaches it.
				if noff := int(le.Uint16(p[pageHeaderSize+2*(i+1):])); noff >= upper && noff+nodeHeaderSize <= w.psize {
					if nk := int(le.Uint16(p[noff+6:])); noff+nodeHeaderSize+nk <= w.psize {
						chi = p[noff+nodeHeaderSize : noff+nodeHeaderSize+nk]
					}
				}
			}
			if err := w.walkPage(t, child, level+1, depth, clo, chi); err != nil {
				return err
			}
			continue
		}
		if err := w.leafNode(t, pg, i, node, key, nflags, int(nlo|nhi<<16), off); err != nil {
			return err
		}
	}
	return nil
}

// keyOrder checks key against its predecessor and the bounds the parent
// branch gives, and returns what is wrong or "".
func (w *walker) keyOrder(t *tree, key, prev, lo, hi []byte) string {
	cmp := bytes.Compare
	if t.intKeys {
		if len(key) != 8 {
			return fmt.Sprintf("integer key of %d bytes", len(key))
		}
		cmp = func(a, b []byte) int {
			if len(a) != 8 || len(b) != 8 {
				return bytes.Compare(a, b)
			}
			x, y := binary.LittleEndian.Uint64(a), binary.LittleEndian.Uint64(b)
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	switch {
	case prev != nil && cmp(prev, key) >= 0:
		return fmt.Sprintf("key %q is not after the previous key %q", clip(key), clip(prev))
	case lo != nil && cmp(key, lo) < 0:
		return fmt.Sprintf("key %q is below its branch's range (from %q)", clip(key), clip(lo))
	case hi != nil && cmp(key, hi) >= 0:
		return fmt.Sprintf("key %q is beyond its branch's range (before %q)", clip(key), clip(hi))
	}
	return ""
}

func clip(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// leafNode checks one leaf entry: its value in the page or in overflow
// pages, a named tree's root record, a free-page list.
func (w *walker) leafNode(t *tree, pg uint64, i int, node, key []byte, nflags uint16, dsize, off int) error {
	name := t.rep.Name
	le := binary.LittleEndian
	ksize := len(key)
	t.rep.Entries++
	var val []byte
	switch {
	case nflags&fDupData != 0:
		w.problem(name, pg, "entry %d: duplicate-key data is not supported by this checker", i)
		return nil
	case nflags&fBigData != 0:
		if off+nodeHeaderSize+ksize+8 > w.psize {
			w.problem(name, pg, "entry %d: overflow reference runs past the page", i)
			return nil
		}
		ov := le.Uint64(node[nodeHeaderSize+ksize:])
		var err error
		if val, err = w.overflow(t, pg, i, ov, dsize); err != nil || val == nil {
			return err
		}
	default:
		if off+nodeHeaderSize+ksize+dsize > w.psize {
			w.problem(name, pg, "entry %d: value of %d bytes runs past the page", i, dsize)
			return nil
		}
		val = node[nodeHeaderSize+ksize : nodeHeaderSize+ksize+dsize]
	}
	switch {
	case nflags&fSubData != 0:
		if !t.main || len(val) != dbSize {
			w.problem(name, pg, "entry %d: misplaced named-tree record (%d bytes)", i, len(val))
			return nil
		}
		w.named = append(w.named, namedTree{name: string(key), db: parseDB(val)})
	case t.free:
		w.freeList(pg, i, val)
	case t.main:
		// A plain record in the main tree: not hatkv's layout, but valid
		// LMDB; the caller's identity check judges it.
	case w.cfg.record != nil:
		if err := w.cfg.record(name, key, val); err != nil {
			w.problem(name, pg, "record %q: %v", clip(key), err)
		}
	}
	return nil
}

// overflow reads a value stored in overflow pages starting at ov, or
// returns nil after reporting why it cannot. Values of trees whose
// records are not checked are not read past the first page.
func (w *walker) overflow(t *tree, pg uint64, i int, ov uint64, dsize int) ([]byte, error) {
	name := t.rep.Name
	if ov < numMetas || ov > w.m.LastPage {
		w.problem(name, pg, "entry %d: overflow page %d outside pages 2..%d", i, ov, w.m.LastPage)
		return nil, nil
	}
	var hdr [pageHeaderSize]byte
	if err := w.read(hdr[:], int64(ov)*int64(w.psize)); err != nil {
		return nil, fmt.Errorf("%s: reading page %d: %w", w.f.Name(), ov, err)
	}
	le := binary.LittleEndian
	n := uint64(le.Uint32(hdr[12:]))
	switch {
	case le.Uint64(hdr[:]) != ov:
		w.problem(name, ov, "overflow page of entry %d (page %d): header says page %d", i, pg, le.Uint64(hdr[:]))
		return nil, nil
	case le.Uint16(hdr[10:])&(pLeaf|pBranch|pOverflow|pMeta) != pOverflow:
		w.problem(name, ov, "overflow page of entry %d (page %d): page flags %#x", i, pg, le.Uint16(hdr[10:]))
		return nil, nil
	case n == 0 || uint64(dsize)+pageHeaderSize > n*uint64(w.psize):
		w.problem(name, ov, "overflow value of %d bytes does not fit its %d pages", dsize, n)
		return nil, nil
	}
	if !w.claim(name, ov, n, stateUsed) {
		return nil, nil
	}
	t.rep.OverflowPages += n
	if !t.free && w.cfg.record == nil {
		return []byte{}, nil
	}
	val := make([]byte, dsize)
	if err := w.read(val, int64(ov)*int64(w.psize)+pageHeaderSize); err != nil {
		return nil, fmt.Errorf("%s: reading overflow page %d: %w", w.f.Name(), ov, err)
	}
	return val, nil
}

// freeList marks the pages of one free-page record (an ID list: count,
// then that many page numbers).
func (w *walker) freeList(pg uint64, i int, val []byte) {
	le := binary.LittleEndian
	if len(val) < 8 || len(val)%8 != 0 {
		w.problem(FreeTree, pg, "entry %d: free-page list of %d bytes", i, len(val))
		return
	}
	n := le.Uint64(val)
	if n != uint64(len(val)/8-1) {
		w.problem(FreeTree, pg, "entry %d: free-page list says %d pages in %d bytes", i, n, len(val))
		return
	}
	for j := uint64(1); j <= n; j++ {
		w.claim(FreeTree, le.Uint64(val[8*j:]), 1, stateFree)
	}
}
