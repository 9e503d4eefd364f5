//go:build !linux

package etcd

import "syscall"

// dieWithTest: only Linux can tie a child's life to its parent's; the
// tests' cleanups kill their children elsewhere.
func dieWithTest() *syscall.SysProcAttr { return nil }
