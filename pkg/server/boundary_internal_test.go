package server

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// TestAtBoundaryWhole: atBoundary tells whether the next HatRPC frame is
// buffered whole, takes serve's finding (whole) instead of looking again,
// and consumes it, so a later boundary looks for itself.
func TestAtBoundaryWhole(t *testing.T) {
	frame := make([]byte, wire.HeaderSize+8)
	wire.SealFrame(frame, wire.KindCall, 0, 1, 0)
	cases := []struct {
		name     string
		buffered []byte // bytes in the reader's buffer
		hat      bool
		served   bool // serve found the frame whole (c.whole)
		want     bool
	}{
		{"a whole frame", frame, true, false, true},
		{"a whole frame and part of the next", append(append([]byte(nil), frame...), frame[:5]...), true, false, true},
		{"half a frame", frame[:wire.HeaderSize+3], true, false, false},
		{"part of a header", frame[:5], true, false, false},
		{"nothing", nil, true, false, false},
		{"serve found it whole", frame, true, true, true},
		{"plain Thrift", frame, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			c := &conn{s: s, hat: tc.hat, whole: tc.served}
			c.greeted = true
			c.br = bufio.NewReaderSize(bytes.NewReader(tc.buffered), readBufSize)
			if len(tc.buffered) > 0 {
				_, err := c.br.Peek(len(tc.buffered)) // fill: all of it is buffered
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, c.atBoundary())
			require.False(t, c.whole, "consumed")
			if tc.want {
				require.Equal(t, tc.want, c.atBoundary(), "the frame is still there")
			}
		})
	}
}

// TestCallStart: a call read whole right after the reader ended one
// inline starts at that end; any other starts now.
func TestCallStart(t *testing.T) {
	const lastEnd = 5 * time.Second // since epoch: long before any now below
	cases := []struct {
		name    string
		whole   bool
		lastEnd time.Duration
		reuse   bool
	}{
		{"burst after an inline call", true, lastEnd, true},
		{"the reader may have waited", false, lastEnd, false},
		{"no inline call before", true, 0, false},
		{"neither", false, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Since(epoch)
			got := callStart(tc.whole, tc.lastEnd)
			if tc.reuse {
				require.Equal(t, tc.lastEnd, got)
				return
			}
			require.GreaterOrEqual(t, got, before)
			require.LessOrEqual(t, got, time.Since(epoch))
		})
	}
}
