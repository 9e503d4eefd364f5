package fastpath

import (
	"errors"
	"os"
	"strings"
	"sync"
)

// ErrUnavailable matches failures to open the verbs provider a lane needs.
var ErrUnavailable = errors.New("fastpath: rdma/shm transport unavailable")

var (
	hostOnce sync.Once
	hostID   string
)

// HostID identifies this kernel (its boot id): two processes may share
// memory only when they run on the same one. Without a readable boot id
// the host name stands in (shm then fails at bootstrap, not silently, if
// two hosts share a name).
func HostID() string {
	hostOnce.Do(func() {
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			hostID = strings.TrimSpace(string(b))
		}
		if hostID == "" {
			if h, err := os.Hostname(); err == nil {
				hostID = "host:" + h
			}
		}
	})
	return hostID
}
