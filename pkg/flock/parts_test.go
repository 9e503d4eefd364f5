package flock

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const hBig = 3

// big answers with as many bytes as the request asks for (u32), a pattern
// that shifts with every byte, so a part lost, repeated or out of order
// shows.
func big(_ context.Context, req []byte) ([]byte, error) {
	n := int(binary.LittleEndian.Uint32(req))
	return pattern(n, req[4]), nil
}

func pattern(n int, seed byte) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(i*7) ^ byte(i>>8) ^ seed
	}
	return out
}

// TestLargeResponsesInParts: a response larger than a message travels in
// parts and reaches its caller whole, at the sizes around a part's edges
// and beyond the ring, with callers of small and large responses mixed on
// the same QPs; one beyond the reply bound fails only its own call.
func TestLargeResponsesInParts(t *testing.T) {
	for _, mode := range []struct {
		name string
		srv  []Option
	}{{"inline", nil}, {"workers", []Option{WithWorkers(4)}}} {
		t.Run(mode.name, func(t *testing.T) {
			d := openDev(t)
			s := newServer(t, d, append([]Option{WithMaxMessage(4 << 10), WithRingSize(16 << 10), WithMaxReply(1 << 20)}, mode.srv...)...)
			s.Handle(hBig, big)
			s.Handle(hEcho, echo)
			c, _ := dial(t, d, s, WithQPs(2), WithMaxMessage(4<<10), WithRingSize(16<<10), WithMaxReply(1<<20))
			ctx := tctx(t)
			part := s.partSize()
			sizes := []int{0, 1, part - 1, part, part + 1, 3*part - 8, 3 * part, 100 << 10, 1 << 20}
			inParallel(t, 8, func(g int) error {
				cl := c.NewCaller()
				for i, n := range sizes {
					req := binary.LittleEndian.AppendUint32(nil, uint32(n))
					req = append(req, byte(g*31+i))
					resp, err := cl.Call(ctx, hBig, req)
					if err != nil {
						return fmt.Errorf("caller %d size %d: %w", g, n, err)
					}
					if !bytes.Equal(resp, pattern(n, req[4])) {
						return fmt.Errorf("caller %d size %d: %d bytes, not the response", g, n, len(resp))
					}
					if err := echoOnce(ctx, c, g*100+i); err != nil { // small calls in between
						return err
					}
				}
				return nil
			})
			_, err := c.Call(ctx, hBig, append(binary.LittleEndian.AppendUint32(nil, 1<<20+1), 0))
			var he *HandlerError
			require.True(t, errors.As(err, &he), "got %v", err)
			assert.Equal(t, ErrTooLarge.Error(), he.Msg)
			require.NoError(t, echoOnce(ctx, c, 0), "the connection works on")
		})
	}
}
