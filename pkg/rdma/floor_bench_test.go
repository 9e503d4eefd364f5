package rdma

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkLaneStreamFloor is the floor of a server stream of 64 KiB
// messages on a lane (docs/design/streams-lanes.md): the
// copies it cannot avoid and nothing else. Each exchange is a small
// request (the client's poll) answered with 16 messages (1 MiB, the
// stream's byte window and a reply's batch) that the server writes into
// its reply lease (ReplyBuffer: the handler's encoder), the engine moves
// to the client (the provider's own copy), and the client copies out
// message by message (the receiver's copy into the message: "fresh", a
// new slice per message as a stream's Recv makes, or "reused", one
// buffer). "memmove" is atb-tcp's memmove system: the same bytes copied
// once on one core from a source beyond the caches. Same process, same
// run, so their ratio is the ceiling of hatrpc-stream-lanes/memmove on
// this host:
//
//	go test ./pkg/rdma -run '^$' -bench LaneStreamFloor -benchtime 2s
func BenchmarkLaneStreamFloor(b *testing.B) {
	const msg, batch = 64 << 10, 16
	b.Run("memmove", func(b *testing.B) {
		const total = 256 << 20
		src := make([]byte, total)
		for i := range src {
			src[i] = byte(i)
		}
		dst := make([]byte, msg)
		b.SetBytes(msg * batch)
		off := 0
		for b.Loop() {
			for range batch {
				copy(dst, src[off:off+msg])
				off = (off + msg) % total
			}
		}
	})
	for _, proto := range Protocols() {
		for _, fresh := range []bool{true, false} {
			name := fmt.Sprintf("%v/reused", proto)
			if fresh {
				name = fmt.Sprintf("%v/fresh", proto)
			}
			b.Run(name, func(b *testing.B) { benchLaneFloor(b, proto, fresh, msg, batch) })
		}
	}
}

func benchLaneFloor(b *testing.B, proto Protocol, fresh bool, msg, batch int) {
	cfg := testEPConfig(PollBusy)
	cli, srv := newRPCPair(b, cfg, cfg, false)
	src := make([]byte, msg)
	for i := range src {
		src[i] = byte(i * 7)
	}
	serve(b, srv, proto, func([]byte) []byte {
		lease := srv.ReplyBuffer(msg * batch)
		if lease == nil {
			lease = make([]byte, msg*batch)
		}
		for i := range batch {
			copy(lease[i*msg:], src)
		}
		return lease
	})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := context.Background()
	req := make([]byte, 16)
	dst := make([]byte, msg)
	var keep []byte
	b.SetBytes(int64(msg * batch))
	for b.Loop() {
		resp, err := cli.Call(ctx, proto, req)
		if err != nil {
			b.Fatal(err)
		}
		require.Len(b, resp, msg*batch)
		for i := range batch {
			if fresh {
				dst = make([]byte, msg)
			}
			copy(dst, resp[i*msg:])
		}
		keep = dst
	}
	require.Equal(b, src, keep)
}
