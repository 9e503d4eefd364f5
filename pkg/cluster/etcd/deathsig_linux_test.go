package etcd

import "syscall"

// dieWithTest makes a child process get SIGKILL when the test process
// dies, so that no etcd or server outlives a test that crashed.
func dieWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
