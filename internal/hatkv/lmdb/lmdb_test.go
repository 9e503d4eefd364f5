package lmdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openTest(t *testing.T, opts ...Option) *Env {
	t.Helper()
	env, err := Open(t.TempDir(), append([]Option{WithFlags(NoSync)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.Close()) })
	return env
}

func openDBI(t *testing.T, env *Env, name string) DBI {
	t.Helper()
	var dbi DBI
	require.NoError(t, env.Update(testCtx(t), func(txn *Txn) error {
		var err error
		dbi, err = txn.OpenDBI(name, Create)
		return err
	}))
	return dbi
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name   string
		rc     int
		target error
	}{
		{"notfound", int(ErrNotFound), ErrNotFound},
		{"keyexist", int(ErrKeyExist), ErrKeyExist},
		{"mapfull", int(ErrMapFull), ErrMapFull},
		{"readersfull", int(ErrReadersFull), ErrReadersFull},
		{"invalid", int(ErrInvalid), ErrInvalid},
		{"version", int(ErrVersionMismatch), ErrVersionMismatch},
		{"corrupted", int(ErrCorrupted), ErrCorrupted},
		{"badvalsize", int(ErrBadValSize), ErrBadValSize},
		{"enoent", int(syscall.ENOENT), fs.ErrNotExist},
		{"eacces", int(syscall.EACCES), fs.ErrPermission},
		{"einval", int(syscall.EINVAL), syscall.EINVAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := &OpError{Op: "test", Err: codeError(tc.rc)}
			require.ErrorIs(t, err, tc.target)
			assert.NotEmpty(t, err.Error())
			var op *OpError
			require.ErrorAs(t, err, &op)
			assert.Equal(t, "test", op.Op)
		})
	}
	assert.Contains(t, ErrNotFound.Error(), "MDB_NOTFOUND")
	assert.NotEmpty(t, Version())
}

func TestCRUD(t *testing.T) {
	env := openTest(t)
	dbi := openDBI(t, env, "data")
	ctx := testCtx(t)
	maxKey := env.MaxKeySize()
	require.Equal(t, 511, maxKey)

	tests := []struct {
		name    string
		key     []byte
		val     []byte
		flags   PutFlag
		wantErr error
	}{
		{"simple", []byte("a"), []byte("1"), 0, nil},
		{"overwrite", []byte("a"), []byte("2"), 0, nil},
		{"nooverwrite", []byte("a"), []byte("3"), NoOverwrite, ErrKeyExist},
		{"empty value", []byte("e"), []byte{}, 0, nil},
		{"empty key", []byte{}, []byte("x"), 0, ErrBadValSize},
		{"max key", bytes.Repeat([]byte("k"), maxKey), []byte("x"), 0, nil},
		{"key too long", bytes.Repeat([]byte("k"), maxKey+1), []byte("x"), 0, ErrBadValSize},
		{"big value", []byte("big"), bytes.Repeat([]byte("v"), 1<<20), 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Update(ctx, func(txn *Txn) error {
				return txn.Put(dbi, tc.key, tc.val, tc.flags)
			})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, env.View(ctx, func(txn *Txn) error {
				got, err := txn.Get(dbi, tc.key)
				require.NoError(t, err)
				assert.Equal(t, tc.val, got)
				return nil
			}))
		})
	}

	require.NoError(t, env.Update(ctx, func(txn *Txn) error { return txn.Del(dbi, []byte("a")) }))
	err := env.Update(ctx, func(txn *Txn) error { return txn.Del(dbi, []byte("a")) })
	require.ErrorIs(t, err, ErrNotFound)
	err = env.View(ctx, func(txn *Txn) error {
		_, err := txn.Get(dbi, []byte("a"))
		return err
	})
	require.ErrorIs(t, err, ErrNotFound)
}

func TestTxnRules(t *testing.T) {
	env := openTest(t)
	dbi := openDBI(t, env, "")
	ctx := testCtx(t)

	var leaked *Txn
	err := env.View(ctx, func(txn *Txn) error {
		leaked = txn
		assert.True(t, txn.ReadOnly())
		return txn.Put(dbi, []byte("k"), []byte("v"), 0)
	})
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = leaked.Get(dbi, []byte("k"))
	require.ErrorIs(t, err, ErrTxnDone)

	sentinel := errors.New("boom")
	err = env.Update(ctx, func(txn *Txn) error {
		require.NoError(t, txn.Put(dbi, []byte("k"), []byte("v"), 0))
		return sentinel
	})
	require.ErrorIs(t, err, sentinel)
	err = env.View(ctx, func(txn *Txn) error { _, err := txn.Get(dbi, []byte("k")); return err })
	require.ErrorIs(t, err, ErrNotFound, "failed update must be rolled back")

	cctx, cancel := context.WithCancel(ctx)
	err = env.Update(cctx, func(txn *Txn) error {
		cancel()
		return txn.Put(dbi, []byte("k"), []byte("v"), 0)
	})
	require.ErrorIs(t, err, context.Canceled)
	err = env.View(ctx, func(txn *Txn) error { _, err := txn.Get(dbi, []byte("k")); return err })
	require.ErrorIs(t, err, ErrNotFound, "update cancelled before commit must be rolled back")

	require.NoError(t, env.Close())
	require.ErrorIs(t, env.View(ctx, func(*Txn) error { return nil }), ErrClosed)
	require.ErrorIs(t, env.Update(ctx, func(*Txn) error { return nil }), ErrClosed)
}

func TestReaderSlotsWaitForContext(t *testing.T) {
	env := openTest(t, WithMaxReaders(1))
	ctx := testCtx(t)
	hold := make(chan struct{})
	inside := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = env.View(ctx, func(*Txn) error {
			close(inside)
			<-hold
			return nil
		})
	}()
	<-inside
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := env.View(short, func(*Txn) error { return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(hold)
	wg.Wait()
	require.NoError(t, env.View(ctx, func(*Txn) error { return nil }))
}

func TestCursorScan(t *testing.T) {
	env := openTest(t)
	dbi := openDBI(t, env, "scan")
	ctx := testCtx(t)
	require.NoError(t, env.Update(ctx, func(txn *Txn) error {
		for i := 0; i < 100; i += 2 {
			if err := txn.Put(dbi, fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "v%d", i), 0); err != nil {
				return err
			}
		}
		return nil
	}))
	tests := []struct {
		name  string
		start string
		op    CursorOp
		want  []string
		err   error
	}{
		{"range exact", "k010", SetRange, []string{"k010", "k012", "k014"}, nil},
		{"range between", "k011", SetRange, []string{"k012", "k014", "k016"}, nil},
		{"range before all", "a", SetRange, []string{"k000", "k002", "k004"}, nil},
		{"range past end", "z", SetRange, nil, ErrNotFound},
		{"set exact", "k020", Set, []string{"k020", "k022", "k024"}, nil},
		{"set missing", "k021", Set, nil, ErrNotFound},
		{"tail", "k096", SetRange, []string{"k096", "k098"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := env.View(ctx, func(txn *Txn) error {
				cur, err := txn.OpenCursor(dbi)
				if err != nil {
					return err
				}
				defer cur.Close()
				k, v, err := cur.Get([]byte(tc.start), tc.op)
				for err == nil && len(got) < 3 {
					require.Equal(t, fmt.Sprintf("v%d", atoi(t, string(k[1:]))), string(v))
					got = append(got, string(k))
					k, v, err = cur.Get(nil, Next)
				}
				if errors.Is(err, ErrNotFound) && got != nil {
					return nil
				}
				return err
			})
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	err := env.View(ctx, func(txn *Txn) error {
		cur, err := txn.OpenCursor(dbi)
		require.NoError(t, err)
		k, _, err := cur.Get(nil, Last)
		require.NoError(t, err)
		assert.Equal(t, "k098", string(k))
		k, _, err = cur.Get(nil, First)
		require.NoError(t, err)
		assert.Equal(t, "k000", string(k))
		st, err := txn.Stat(dbi)
		require.NoError(t, err)
		assert.EqualValues(t, 50, st.Entries)
		return nil // cursor left open on purpose: the txn end must close it
	})
	require.NoError(t, err)

	require.NoError(t, env.Update(ctx, func(txn *Txn) error {
		cur, err := txn.OpenCursor(dbi)
		if err != nil {
			return err
		}
		if _, _, err := cur.Get([]byte("k050"), Set); err != nil {
			return err
		}
		return cur.Del()
	}))
	err = env.View(ctx, func(txn *Txn) error { _, err := txn.Get(dbi, []byte("k050")); return err })
	require.ErrorIs(t, err, ErrNotFound)
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

func TestConcurrentReadersAcrossGoroutines(t *testing.T) {
	env := openTest(t, WithMaxReaders(8))
	dbi := openDBI(t, env, "c")
	ctx := testCtx(t)
	require.NoError(t, env.Update(ctx, func(txn *Txn) error {
		return txn.Put(dbi, []byte("key"), []byte("value"), 0)
	}))
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				err := env.View(ctx, func(txn *Txn) error {
					v, err := txn.GetView(dbi, []byte("key"))
					if err != nil {
						return err
					}
					if string(v) != "value" {
						return fmt.Errorf("got %q", v)
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := env.Update(ctx, func(txn *Txn) error {
					return txn.Put(dbi, fmt.Appendf(nil, "w%d-%d", g, i), []byte("x"), 0)
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	info, err := env.Info()
	require.NoError(t, err)
	assert.LessOrEqual(t, info.NumReaders, uint(8))
	assert.EqualValues(t, 8, info.MaxReaders)
}

func TestMapFullKeepsServing(t *testing.T) {
	env := openTest(t, WithMapSize(1<<20))
	dbi := openDBI(t, env, "full")
	ctx := testCtx(t)
	val := bytes.Repeat([]byte("x"), 1000)
	var n int
	var err error
	for n = 0; n < 10000; n++ {
		err = env.Update(ctx, func(txn *Txn) error {
			return txn.Put(dbi, fmt.Appendf(nil, "key%05d", n), val, 0)
		})
		if err != nil {
			break
		}
	}
	require.ErrorIs(t, err, ErrMapFull)
	require.Greater(t, n, 100)
	require.NoError(t, env.View(ctx, func(txn *Txn) error {
		v, err := txn.Get(dbi, []byte("key00000"))
		require.NoError(t, err)
		assert.Equal(t, val, v)
		return nil
	}))
	// A completely full map cannot even delete (copy-on-write needs fresh
	// pages), so the documented recovery is a small resize first.
	err = env.Update(ctx, func(txn *Txn) error { return txn.Del(dbi, []byte("key00000")) })
	if err != nil {
		require.ErrorIs(t, err, ErrMapFull)
	}
	info, err := env.Info()
	require.NoError(t, err)
	require.NoError(t, env.SetMapSize(ctx, info.MapSize+256<<10))
	info2, err := env.Info()
	require.NoError(t, err)
	require.Equal(t, info.MapSize+256<<10, info2.MapSize)
	require.NoError(t, env.Update(ctx, func(txn *Txn) error {
		for i := 1; i < n/2; i++ {
			if err := txn.Del(dbi, fmt.Appendf(nil, "key%05d", i)); err != nil {
				return err
			}
		}
		return nil
	}))
	for i := 0; i < n/4; i++ {
		require.NoError(t, env.Update(ctx, func(txn *Txn) error {
			return txn.Put(dbi, fmt.Appendf(nil, "new%05d", i), val, 0)
		}), "put after delete %d", i)
	}
}

func TestOpenRefusesGarbage(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string
		want  error
	}{
		{"random data.mdb", func(t *testing.T, dir string) string {
			buf := make([]byte, 64<<10)
			for i := range buf {
				buf[i] = byte(i*7 + i/13)
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "data.mdb"), buf, 0o644))
			return dir
		}, ErrInvalid},
		{"missing dir", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope") }, fs.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.setup(t, t.TempDir())
			env, err := Open(path)
			if env != nil {
				_ = env.Close()
			}
			require.ErrorIs(t, err, tc.want)
			var op *OpError
			require.ErrorAs(t, err, &op)
			assert.Equal(t, path, op.Path)
		})
	}
}

func TestEnvInfoAndFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "db")
	env, err := Open(file, WithFlags(NoSubdir|NoMetaSync|WriteMap), WithMapSize(2<<20), WithMaxDBs(2))
	require.NoError(t, err)
	defer env.Close()
	assert.Equal(t, NoSubdir|NoMetaSync|WriteMap|NoTLS, env.Flags())
	assert.Equal(t, file, env.Path())
	ctx := testCtx(t)
	require.NoError(t, env.Update(ctx, func(txn *Txn) error {
		d, err := txn.OpenDBI("", 0)
		if err != nil {
			return err
		}
		return txn.Put(d, []byte("a"), []byte("b"), 0)
	}))
	require.NoError(t, env.Sync(ctx, true))
	st, err := env.Stat()
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Entries)
	assert.Positive(t, st.PageSize)
	info, err := env.Info()
	require.NoError(t, err)
	assert.EqualValues(t, 2<<20, info.MapSize)
	assert.Positive(t, info.LastTxnID)
	dead, err := env.ReaderCheck()
	require.NoError(t, err)
	assert.Zero(t, dead)
	_, err = os.Stat(file + "-lock")
	require.NoError(t, err)
}

func TestReadOnlyEnv(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx(t)
	env, err := Open(dir)
	require.NoError(t, err)
	require.NoError(t, env.Update(ctx, func(txn *Txn) error {
		d, err := txn.OpenDBI("", 0)
		if err != nil {
			return err
		}
		return txn.Put(d, []byte("k"), []byte("v"), 0)
	}))
	require.NoError(t, env.Close())

	ro, err := Open(dir, WithFlags(ReadOnly))
	require.NoError(t, err)
	defer ro.Close()
	require.NoError(t, ro.View(ctx, func(txn *Txn) error {
		d, err := txn.OpenDBI("", 0)
		if err != nil {
			return err
		}
		v, err := txn.Get(d, []byte("k"))
		require.NoError(t, err)
		assert.Equal(t, []byte("v"), v)
		return nil
	}))
	err = ro.Update(ctx, func(txn *Txn) error { return nil })
	require.ErrorIs(t, err, fs.ErrPermission)
}

// TestWriteMapReservesMap: with WriteMap the data file's blocks are
// allocated for the whole map, at Open and when SetMapSize grows it (a
// store into a hole the disk cannot fill would be a SIGBUS); without
// WriteMap the file stays as small as its pages.
func TestWriteMapReservesMap(t *testing.T) {
	allocated := func(path string) int64 {
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(path, &st))
		return st.Blocks * 512
	}
	for _, tc := range []struct {
		name  string
		flags EnvFlag
		want  func(t *testing.T, got, mapSize int64)
	}{
		{"writemap", NoSubdir | WriteMap, func(t *testing.T, got, mapSize int64) {
			assert.GreaterOrEqual(t, got, mapSize, "the whole map is allocated")
		}},
		{"no writemap", NoSubdir, func(t *testing.T, got, mapSize int64) {
			assert.Less(t, got, int64(1<<20), "only the pages written are")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "db")
			env, err := Open(file, WithFlags(tc.flags), WithMapSize(4<<20))
			require.NoError(t, err)
			defer env.Close()
			tc.want(t, allocated(file), 4<<20)
			require.NoError(t, env.SetMapSize(testCtx(t), 8<<20))
			tc.want(t, allocated(file), 8<<20)
		})
	}
}

// A Scanner returns what Get(Next) returns, whatever its run length, and
// nothing once its transaction is over.
func TestScanner(t *testing.T) {
	env := openTest(t)
	dbi := openDBI(t, env, "scanner")
	ctx := testCtx(t)
	var want []string
	require.NoError(t, env.Update(ctx, func(txn *Txn) error {
		for i := 0; i < 150; i++ {
			k := fmt.Appendf(nil, "k%03d", i)
			want = append(want, string(k))
			if err := txn.Put(dbi, k, fmt.Appendf(nil, "v%d", i), 0); err != nil {
				return err
			}
		}
		return nil
	}))
	tests := []struct {
		name  string
		start string // "": from the first key
		ahead int
		want  []string
	}{
		{"one a run", "", 1, want},
		{"runs of 7", "", 7, want},
		{"runs of ScanAhead", "", ScanAhead, want},
		{"ahead clamped above", "", 10 * ScanAhead, want},
		{"ahead clamped below", "", 0, want},
		{"from the middle", "k100", 64, want[100:]},
		{"from the last", "k149", 3, want[149:]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var sc *Scanner
			require.NoError(t, env.View(ctx, func(txn *Txn) error {
				cur, err := txn.OpenCursor(dbi)
				require.NoError(t, err)
				var k, v []byte
				if tc.start == "" {
					k, v, err = cur.Get(nil, First)
				} else {
					k, v, err = cur.Get([]byte(tc.start), SetRange)
				}
				sc = cur.Scanner(tc.ahead)
				for ; err == nil; k, v, err = sc.Next() {
					require.Equal(t, fmt.Sprintf("v%d", atoi(t, string(k[1:]))), string(v))
					got = append(got, string(k))
				}
				require.ErrorIs(t, err, ErrNotFound)
				_, _, err = sc.Next()
				require.ErrorIs(t, err, ErrNotFound, "the end stays the end")
				return nil
			}))
			assert.Equal(t, tc.want, got)
			_, _, err := sc.Next()
			require.ErrorIs(t, err, ErrTxnDone)
		})
	}
	// Entries fetched ahead are not handed out after the transaction.
	var sc *Scanner
	require.NoError(t, env.View(ctx, func(txn *Txn) error {
		cur, err := txn.OpenCursor(dbi)
		require.NoError(t, err)
		_, _, err = cur.Get(nil, First)
		require.NoError(t, err)
		sc = cur.Scanner(ScanAhead)
		k, _, err := sc.Next()
		require.NoError(t, err)
		require.Equal(t, "k001", string(k))
		return nil
	}))
	_, _, err := sc.Next()
	require.ErrorIs(t, err, ErrTxnDone)
}
