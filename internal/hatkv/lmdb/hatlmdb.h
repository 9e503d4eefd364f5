/* Small static helpers so Go never builds an MDB_val that holds a Go
 * pointer in Go memory (forbidden by the cgo pointer rules): the MDB_val
 * for inputs lives on the C stack for the duration of one call. */
#ifndef HATLMDB_H
#define HATLMDB_H
#include <fcntl.h>
#include <stdlib.h>
#include <lmdb.h>

/* With MDB_WRITEMAP the data file is a sparse file as large as the map,
 * and LMDB writes by storing into the map: a page the file system cannot
 * back (a full disk) raises SIGBUS in the writer, which kills the process.
 * Allocating the file's blocks up to size first turns that into an
 * error here. Returns 0 or an errno (posix_fallocate's fallback writes a
 * byte a block where the file system has no fallocate). */
static inline int hat_reserve(MDB_env *env, size_t size) {
	mdb_filehandle_t fd;
	int rc = mdb_env_get_fd(env, &fd);
	if (rc)
		return rc;
	return posix_fallocate(fd, 0, (off_t)size);
}

/* The map size in force: the one set, raised by mdb_env_open to what the
 * file's data already uses. */
static inline size_t hat_mapsize(MDB_env *env) {
	MDB_envinfo info;
	if (mdb_env_info(env, &info))
		return 0;
	return info.me_mapsize;
}

static inline int hat_put(MDB_txn *txn, MDB_dbi dbi, void *k, size_t kn,
                          void *v, size_t vn, unsigned int flags) {
	MDB_val key = {kn, k};
	MDB_val val = {vn, v};
	return mdb_put(txn, dbi, &key, &val, flags);
}

static inline int hat_get(MDB_txn *txn, MDB_dbi dbi, void *k, size_t kn,
                          MDB_val *out) {
	MDB_val key = {kn, k};
	return mdb_get(txn, dbi, &key, out);
}

static inline int hat_del(MDB_txn *txn, MDB_dbi dbi, void *k, size_t kn) {
	MDB_val key = {kn, k};
	return mdb_del(txn, dbi, &key, NULL);
}

/* The returned key is copied out only when LMDB replaced it with a pointer
 * into the map; otherwise it would still be the caller's Go pointer, which
 * C must not store into Go memory. */
static inline int hat_cursor_get(MDB_cursor *c, void *k, size_t kn,
                                 MDB_val *kout, MDB_val *vout, int op) {
	MDB_val key = {kn, k};
	MDB_val val = {0, NULL};
	int rc = mdb_cursor_get(c, &key, &val, (MDB_cursor_op)op);
	if (rc == 0) {
		if (key.mv_data == k) {
			kout->mv_size = kn;
			kout->mv_data = NULL;
		} else {
			*kout = key;
		}
		*vout = val;
	}
	return rc;
}

/* Moves c forward (MDB_NEXT) up to n times, storing the i-th entry's key
 * and value in kv[2i] and kv[2i+1]: one crossing from Go for a run of
 * records instead of one each (a streamed scan spent a third of its
 * server CPU in per-record calls). *got is how many were stored; the
 * status is that of the move that ended the run (MDB_NOTFOUND at the end
 * of the database), 0 when n were stored. */
static inline int hat_cursor_next_n(MDB_cursor *c, MDB_val *kv, int n,
                                    int *got) {
	int rc = 0, i = 0;
	for (; i < n; i++) {
		rc = mdb_cursor_get(c, &kv[2 * i], &kv[2 * i + 1], MDB_NEXT);
		if (rc)
			break;
	}
	*got = i;
	return rc;
}
#endif
