//go:build cgo && linux

package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// gatedBlobs serves S.blobs as blobStreams does, but sends only the first
// `first` messages before it waits for gate (or its context).
func gatedBlobs(ts *testServer, first int, gate <-chan struct{}) (ended chan error) {
	ended = make(chan error, 4)
	ts.srv.Register(&server.Service{Name: "S", Methods: []server.Method{{
		Name: "blobs", Stream: stream.Server,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			err := ss.RecvMsg(&a)
			for i := 0; err == nil && i < int(a.Mode); i++ {
				if i == first {
					select {
					case <-gate:
					case <-ctx.Done():
						err = ctx.Err()
						continue
					}
				}
				err = ss.SendMsg(&wiretest.EchoArgs{Blob: bytes.Repeat([]byte{byte(i + 1)}, 64<<10)})
			}
			ended <- err
			return nil, err
		},
	}}})
	return ended
}

// waitTurn waits until the stream's next lane exchange is turn's.
func waitTurn(t *testing.T, st client.Stream, turn string) {
	t.Helper()
	require.Eventually(t, func() bool { return client.LaneTurn(st) == turn },
		testenv.HangGuard(5*time.Second), time.Millisecond, "lane turn %q, want %q", client.LaneTurn(st), turn)
}

// A server stream whose messages are read in place hands its lane's next
// exchange to the caller: the RecvMsg that gives back the reply's last
// message runs it (stream_lanedrive.go). The caller holds the first
// message until the runner offered the turn, so the caller's exchange is
// certain; the handler then waits until that exchange is under way (its
// poll held), or is canceled during it.
func TestServerStreamCallerDrives(t *testing.T) {
	const n, first = 12, 3
	tests := []struct {
		name   string
		cancel bool // cancel the stream while its caller's poll is held
	}{
		{"to the end", false},
		{"canceled in the caller's exchange", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := laneServer(t)
			gate := make(chan struct{})
			ended := gatedBlobs(ts, first, gate)
			c := dial(t, ts.addr, client.WithMultiplexed())
			ctx, cancel := context.WithCancel(tctx(t))
			defer cancel()
			st, err := c.NewStream(ctx, blobMethod(true), &wiretest.EchoResult{})
			require.NoError(t, err)
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: n}))
			require.NoError(t, st.CloseSend())

			a := new(wiretest.EchoArgs)
			require.NoError(t, st.RecvMsg(a))
			require.NoError(t, checkBlob(a, 0))
			waitTurn(t, st, "offered")
			// Once the caller runs the exchange the handler's gate opens
			// (or the stream is canceled): its poll is held until then.
			unblocked := make(chan struct{})
			go func() {
				defer close(unblocked)
				waitTurn(t, st, "caller")
				if tt.cancel {
					cancel()
				} else {
					close(gate)
				}
			}()
			i := 1
			for ; ; i++ {
				a := new(wiretest.EchoArgs)
				err := st.RecvMsg(a)
				if err != nil {
					if tt.cancel {
						require.ErrorIs(t, err, context.Canceled)
					} else {
						require.ErrorIs(t, err, io.EOF)
					}
					break
				}
				require.NoError(t, checkBlob(a, i))
			}
			<-unblocked
			require.GreaterOrEqual(t, client.CallerExchanges(c), uint64(1))
			select {
			case err := <-ended:
				if tt.cancel {
					require.True(t, errors.Is(err, context.Canceled), "handler ended with %v", err)
					require.LessOrEqual(t, i, first)
				} else {
					require.NoError(t, err)
					require.Equal(t, n, i)
				}
			case <-tctx(t).Done():
				t.Fatal("the handler did not end")
			}
			// The lane is back in step for the next stream: the same lane.
			setups := client.LaneSetups(c)
			st2, err := c.NewStream(tctx(t), blobMethod(true), &wiretest.EchoResult{})
			require.NoError(t, err)
			require.NoError(t, st2.SendMsg(&wiretest.EchoArgs{Mode: 0}))
			require.NoError(t, st2.CloseSend())
			if tt.cancel {
				close(gate)
			}
			require.ErrorIs(t, st2.RecvMsg(new(wiretest.EchoArgs)), io.EOF)
			require.Equal(t, setups, client.LaneSetups(c))
			require.Equal(t, 1, client.LanesOpen(c))
		})
	}
}
