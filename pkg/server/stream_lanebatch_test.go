//go:build cgo && linux

package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestStreamBatchesByPlan: a client or bidirectional stream of large
// messages on lanes sends its second lane's batches by the protocol its
// plan's batch rows name (hints.Table.StreamBatch: read_rndv past the
// server's pre-known buffer, on shm and ibv), as the lanes' endpoints
// count them, and none falls back to a write rendezvous; every byte
// arrives intact and in order (a digest of the client stream, each echo
// of the bidirectional one).
func TestStreamBatchesByPlan(t *testing.T) {
	s, _, addr := laneStreams(t)
	s.Register(&server.Service{Name: "B", Methods: []server.Method{{Name: "digest", Stream: stream.Client,
		// digest: the SHA-256 of every message's text and bytes, in order.
		HandleStream: digestStream}}})
	c := dial(t, addr)
	// Sizes on both sides of the server's pre-known buffer (64 KiB): a
	// burst of them batches well past it.
	sizes := []int{64 << 10, 100 << 10, 10, 200 << 10, 1 << 10, 64 << 10, 16 << 10, 5}
	msg := func(i int) *wiretest.EchoArgs {
		b := make([]byte, sizes[i%len(sizes)])
		for j := range b {
			b[j] = byte(i*7 + j*13)
		}
		return &wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: b}
	}
	const n = 64

	// requireBatchesByPlan checks fn's plan and what its lanes sent.
	requireBatchesByPlan := func(t *testing.T, fn string) {
		t.Helper()
		plan := c.Plan(fn)
		require.Equal(t, fastpathtest.Transport(), plan.Transport.String())
		require.NotNil(t, plan.StreamBatch, "a client-sending stream's table has batch rows\n%s", plan)
		big := plan.StreamBatchRowFor(1 << 20)
		require.Equal(t, hints.ProtoReadRNDV, big.Protocol, "%s", plan)
		require.Equal(t, plan.LaneRowFor(64), plan.StreamBatchRowFor(64), "small batches: the lane's row")
		var st *client.LaneStats
		for _, ls := range c.LaneStats() {
			if ls.Function == fn {
				st = &ls
			}
		}
		require.NotNil(t, st, "%s used lanes", fn)
		want := fastpath.EngineProtocol(big.Protocol).String()
		require.Positive(t, st.Requests[want], "batches asked for %s: %v", want, st.Requests)
		require.Positive(t, st.Sent[want], "batches sent by %s: %v", want, st.Sent)
		require.Zero(t, st.Sent["write_rndv"], "no batch fell back to a write rendezvous: %v", st.Sent)
	}

	t.Run("client stream", func(t *testing.T) {
		var res wiretest.EchoResult
		m := &client.Method{Service: "B", Name: "digest", Stream: stream.Client,
			Hints: &hints.Function{Name: "digest", Stream: stream.Client}}
		st, err := c.NewStream(tctx(t), m, &res)
		require.NoError(t, err)
		h := sha256.New()
		for i := range n {
			a := msg(i)
			digestMsg(h, a)
			require.NoError(t, st.SendMsg(a))
		}
		require.NoError(t, st.CloseSend())
		require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		require.NotNil(t, res.Success)
		require.Equal(t, hex.EncodeToString(h.Sum(nil)), *res.Success, "every byte arrived, in order")
		requireOnLanes(t, s, c, "B", "digest", 1)
		requireBatchesByPlan(t, "B:digest")
	})
	t.Run("bidi", func(t *testing.T) {
		m := &client.Method{Service: "S", Name: "echo", Stream: stream.Bidi,
			Hints: &hints.Function{Name: "echo", Stream: stream.Bidi}}
		st, err := c.NewStream(tctx(t), m, &wiretest.EchoResult{})
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			for i := range n {
				var a wiretest.EchoArgs
				if err := st.RecvMsg(&a); err != nil {
					got <- err
					return
				}
				if w := msg(i); a.Msg != w.Msg || !bytes.Equal(a.Blob, w.Blob) {
					got <- fmt.Errorf("echo %d: message %q, %d bytes, not as sent", i, a.Msg, len(a.Blob))
					return
				}
			}
			got <- st.RecvMsg(&wiretest.EchoArgs{})
		}()
		for i := range n {
			require.NoError(t, st.SendMsg(msg(i)))
		}
		require.NoError(t, st.CloseSend())
		select {
		case err := <-got:
			require.Equal(t, io.EOF, err)
		case <-time.After(eventually):
			t.Fatal("the echoes did not come")
		}
		requireOnLanes(t, s, c, "S", "echo", 1)
		requireBatchesByPlan(t, "S:echo")
	})
}

func digestMsg(h hash.Hash, a *wiretest.EchoArgs) {
	h.Write([]byte(a.Msg))
	h.Write(a.Blob)
}

// digestStream is a client stream's handler answering the SHA-256 of
// every message's text and bytes, in order.
func digestStream(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
	h := sha256.New()
	for {
		var a wiretest.EchoArgs
		switch err := ss.RecvMsg(&a); err {
		case nil:
			digestMsg(h, &a)
		case io.EOF:
			sum := hex.EncodeToString(h.Sum(nil))
			return &wiretest.EchoResult{Success: &sum}, nil
		default:
			return nil, err
		}
	}
}
