// Package rdma is HatRPC's verbs layer: a small C core with two providers,
// "ibv" (rdma-core's libibverbs) and "shm" (RC verbs semantics between
// processes on one host, in shared memory), behind one provider table.
//
// The Go side is a thin wrapper: no C type appears in an exported signature,
// work requests and completions are laid out exactly like their C
// counterparts so a post or a poll is one cgo crossing per batch, and
// registered memory is owned by C and seen from Go through leases (MR.Bytes).
//
// Addresses in SGEs must point into registered memory obtained from
// PD.AllocMR; the C core reads them directly.
package rdma

/*
#cgo CFLAGS: -std=gnu11 -O2 -Wall
#cgo LDFLAGS: -libverbs -lpthread
#include "hr.h"
*/
import "C"
