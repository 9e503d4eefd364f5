//go:build cgo && linux

package server

import (
	"golang.org/x/sys/unix"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// guardProcess makes the process non-dumpable before it hands shared
// segments to clients (unless WithDumpable): the kernel then owns
// /proc/<pid>/{fd,mem,maps,environ} by root and refuses ptrace to
// processes without CAP_SYS_PTRACE, so a same-uid process can neither
// open the server's memfds through /proc/<pid>/fd nor read its memory —
// the per-connection segments would mean nothing if it could. The flag
// holds until exec; it also stops core dumps.
func (s *Server) guardProcess(provider string) {
	if s.opts.dumpable || provider != rdma.ProviderSHM {
		return
	}
	if err := forbidDumps(); err != nil {
		s.log.Warn("hatrpc: cannot make the process non-dumpable; same-user processes can read its shared segments through /proc", "err", err)
	}
}

// forbidDumps is prctl(PR_SET_DUMPABLE, 0).
func forbidDumps() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
