// Package lmdb is a thin cgo binding to the system liblmdb.
//
// Design notes:
//
//   - Every environment is opened with MDB_NOTLS so a read transaction is
//     tied to its handle rather than to an OS thread; goroutines may then
//     migrate freely during View. Reset read handles are cached and renewed,
//     so steady-state reads do no C allocation.
//   - Write transactions run inside Update with the goroutine locked to its
//     OS thread, because LMDB's writer mutex belongs to the thread that took
//     it. Writers from this process queue on a Go channel first, which lets
//     the wait honour a context.
//   - Keys and values are passed to C only for the duration of one call and
//     are wrapped in MDB_val structures on the C stack (see hatlmdb.h), as
//     the cgo pointer rules require. LMDB copies them on put.
//   - GetView and Cursor.Get return slices into the memory map: they are
//     valid only until the transaction ends and must not be modified. Get
//     returns a Go copy.
//   - All LMDB status codes become Go errors in errors.go: Errno sentinels
//     for MDB_* codes (errors.Is(err, lmdb.ErrNotFound)), syscall.Errno for
//     system errors, wrapped in *OpError naming the failed call.
package lmdb
