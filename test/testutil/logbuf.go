package testutil

import (
	"bytes"
	"sync"
)

// LogBuffer is a log destination that goroutines share (a server's or a
// client's logger writes to it from theirs), read with String.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *LogBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// String returns everything written so far.
func (w *LogBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
