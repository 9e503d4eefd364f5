package wire

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingWriter records every write; not goroutine-safe (the Writer
// serialises writes).
type countingWriter struct {
	b      bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.b.Write(p)
}

func TestWriterHoldBatchesUntilRelease(t *testing.T) {
	sink := &countingWriter{}
	w := NewWriter(sink, nil)
	w.Hold()
	for i := range 10 {
		require.NoError(t, w.Write(fmt.Appendf(nil, "<%d>", i)))
	}
	require.Zero(t, sink.writes, "held frames wait for Release")
	require.NoError(t, w.Release())
	require.Equal(t, 1, sink.writes, "held frames go out in one write")
	require.Equal(t, "<0><1><2><3><4><5><6><7><8><9>", sink.b.String())

	// Without a Hold frames are written at once again.
	require.NoError(t, w.Write([]byte("<x>")))
	require.Equal(t, 2, sink.writes)
}

func TestWriterHoldKeepsOrderPastLimits(t *testing.T) {
	sink := &countingWriter{}
	w := NewWriter(sink, nil)
	var want bytes.Buffer
	w.Hold()
	small := bytes.Repeat([]byte{'s'}, 1000)
	for range maxHeld/len(small) + 3 { // overflows what a Hold keeps
		require.NoError(t, w.Write(small))
		want.Write(small)
	}
	big := bytes.Repeat([]byte{'B'}, bigFrame) // never held
	require.NoError(t, w.Write(big))
	want.Write(big)
	require.NoError(t, w.Write([]byte("tail")))
	want.WriteString("tail")
	require.NoError(t, w.Release())
	require.True(t, bytes.Equal(want.Bytes(), sink.b.Bytes()), "frames keep their order")
}

func TestWriterNestedHoldsAndConcurrentWriters(t *testing.T) {
	sink := &syncBuf{}
	w := NewWriter(sink, nil)
	w.Hold()
	w.Hold()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				require.NoError(t, w.Write(fmt.Appendf(nil, "<%d:%02d>", g, i)))
			}
		}()
	}
	wg.Wait()
	require.NoError(t, w.Release())
	sink.mu.Lock()
	require.Zero(t, sink.writes, "one Hold is still open")
	sink.mu.Unlock()
	require.NoError(t, w.Release())
	w.Wait()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	require.Equal(t, 4*50*len("<0:00>"), sink.b.Len())
	require.LessOrEqual(t, sink.writes, 2)
}
