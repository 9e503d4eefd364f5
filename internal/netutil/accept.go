// Package netutil holds what the accept loops of the server and of the
// listeners in front of it (hatkv's token listener, tpch's SASL sniffer)
// share: which accept errors pass, and how long to wait after one.
package netutil

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// passing are the accept errors of a moment: the process or the host out
// of descriptors or kernel memory, a connection reset before it was
// taken. Out of descriptors is what a flood of connections causes;
// ending an accept loop there would let a peer stop a server for good,
// where waiting lets it serve again once connections close.
var passing = []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR}

// AcceptRetryable tells an accept error that passes from a listener that
// is gone (closed, or failing for good).
func AcceptRetryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range passing {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Backoff is the wait between accepts that keep failing: 5 ms doubling to
// 1 s, as net/http's server does.
type Backoff struct{ d time.Duration }

// Next is the wait after one more failure in a row.
func (b *Backoff) Next() time.Duration {
	b.d = min(max(2*b.d, 5*time.Millisecond), time.Second)
	return b.d
}

// Reset starts over after an accept that worked.
func (b *Backoff) Reset() { b.d = 0 }
