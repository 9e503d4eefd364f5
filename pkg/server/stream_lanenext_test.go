//go:build cgo && linux

package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A bulk server stream's lane lends its outbox the engine's other staging
// buffer across each exchange (NextReplyBuffer): the handler writes into
// registered memory while the lane sends. A client that goes mid-stream,
// by canceling its stream or closing its Conn, at any point of that,
// leaves nothing: the handler ends, the lane's endpoint closes only once
// the lease is back (the handler writes into the outbox's own memory from
// then on, never into a freed buffer), and both buffers go with it.
func TestServerStreamNextLeaseClientGone(t *testing.T) {
	const blob = 64 << 10
	tests := []struct {
		name string
		gone func(cancel context.CancelFunc, c *client.Conn)
	}{
		{"cancel", func(cancel context.CancelFunc, _ *client.Conn) { cancel() }},
		{"close", func(_ context.CancelFunc, c *client.Conn) { require.NoError(t, c.Close()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, addr := laneStreams(t)
			ended := make(chan error, 8)
			s.Register(&server.Service{Name: "N", Methods: []server.Method{{Name: "flood", Stream: stream.Server,
				// flood: messages of the request's Blob until the stream ends.
				HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
					var a wiretest.EchoArgs
					if err := ss.RecvMsg(&a); err != nil {
						return nil, err
					}
					for {
						if err := ss.SendMsg(&wiretest.EchoArgs{Blob: a.Blob}); err != nil {
							ended <- err
							return nil, err
						}
					}
				}}}})
			next := server.NextStreamLeases(s)
			// Gone after a few messages, then after many: the lease is
			// lent, being written or being sent from at different points.
			for _, after := range []int{1, 3, 40} {
				c, err := client.Dial(tctx(t), addr)
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(tctx(t))
				st, err := c.NewStream(ctx, &client.Method{Service: "N", Name: "flood", Stream: stream.Server}, &wiretest.EchoResult{})
				require.NoError(t, err)
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Blob: make([]byte, blob)}))
				require.NoError(t, st.CloseSend())
				for i := range after {
					var a wiretest.EchoArgs
					require.NoError(t, st.RecvMsg(&a), "message %d", i)
					require.Len(t, a.Blob, blob)
				}
				tt.gone(cancel, c)
				select {
				case err := <-ended:
					require.Error(t, err)
				case <-time.After(eventually):
					t.Fatal("the handler outlived its client")
				}
				cancel()
				_ = c.Close()
				require.Eventually(t, func() bool { return lanesOpen(t, s) == 0 }, eventually, time.Millisecond, "the lane's endpoint closed")
				require.Eventually(t, func() bool { k, b := server.StreamState(s); return k == 0 && b == 0 }, eventually, time.Millisecond)
				require.Eventually(t, func() bool { return laneGoroutines() == "" }, eventually, time.Millisecond, "%s", laneGoroutines)
			}
			require.Greater(t, server.NextStreamLeases(s), next, "the replies lent the next")
		})
	}
}

// A message past the limit, refused while the next reply's lease is lent
// (a bulk stream: every reply lends it), leaves nothing in it and no
// credit taken: the messages before and after it arrive whole and in
// order, on the lane the stream keeps.
func TestServerStreamNextLeaseMsgPastLimit(t *testing.T) {
	const blob, limit, before, after = 64 << 10, 256 << 10, 24, 24
	lim := proto.DefaultLimits
	lim.MaxMessageSize = limit
	s, _, addr := laneStreams(t, server.WithLimits(lim))
	refused := make(chan error, 1)
	s.Register(&server.Service{Name: "N", Methods: []server.Method{{Name: "mixed", Stream: stream.Server,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			if err := ss.RecvMsg(&a); err != nil {
				return nil, err
			}
			for i := range before + after {
				if i == before {
					refused <- ss.SendMsg(&wiretest.EchoArgs{Msg: "big", Blob: make([]byte, 2*limit)})
				}
				if err := ss.SendMsg(&wiretest.EchoArgs{Msg: fmt.Sprint(i), Blob: a.Blob}); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}}}})
	c := dial(t, addr)
	next := server.NextStreamLeases(s)
	st, err := c.NewStream(tctx(t), &client.Method{Service: "N", Name: "mixed", Stream: stream.Server}, &wiretest.EchoResult{})
	require.NoError(t, err)
	body := make([]byte, blob)
	for i := range body {
		body[i] = byte(i * 7)
	}
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Blob: body}))
	require.NoError(t, st.CloseSend())
	for i := range before + after {
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a), "message %d", i)
		require.Equal(t, fmt.Sprint(i), a.Msg)
		require.Equal(t, body, a.Blob, "message %d", i)
		if i == before-1 {
			select {
			case err := <-refused:
				var tl *stream.TooLargeError
				require.True(t, errors.As(err, &tl), "%v", err)
				require.ErrorIs(t, err, proto.ErrSizeLimit)
			case <-time.After(eventually):
				t.Fatal("the handler's SendMsg did not return")
			}
		}
	}
	require.ErrorIs(t, st.RecvMsg(&wiretest.EchoArgs{}), io.EOF)
	lane, tcp := c.StreamRoutes()
	require.Equal(t, uint64(1), lane)
	require.Zero(t, tcp)
	require.Greater(t, server.NextStreamLeases(s), next, "the replies lent the next")
}
