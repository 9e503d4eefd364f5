package fault_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// hostileServer accepts connections and runs script on each; it is the
// mirror image of TestGarbageInput, for the client side.
func hostileServer(t *testing.T, script func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln := testutil.ListenLocal(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				script(c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// readFramed reads one framed message (what a framed plain-Thrift client
// sends) and returns its seqid.
func readFramed(br *bufio.Reader) (int32, error) {
	var n [4]byte
	if _, err := io.ReadFull(br, n[:]); err != nil {
		return 0, err
	}
	msg := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(br, msg); err != nil {
		return 0, err
	}
	h, _, err := proto.DecodeMessageHeader(proto.Binary, msg, nil)
	return h.SeqID, err
}

// upgradeThen answers the HatRPC handshake like a HatRPC server and then
// answers the first call with reply.
func upgradeThen(reply func(seq int32) []byte) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		seq, err := readFramed(br)
		if err != nil {
			return
		}
		msg, err := proto.EncodeFramedMessage(proto.Binary, nil, wire.HelloMethod, proto.Reply, seq,
			&wire.HelloReply{Version: wire.Version, Caps: wire.CapFraming, Transport: "tcp", MaxFrame: 1 << 20})
		if err != nil {
			return
		}
		if _, err := c.Write(msg); err != nil {
			return
		}
		h := make([]byte, wire.HeaderSize)
		if _, err := io.ReadFull(br, h); err != nil {
			return
		}
		_, _ = c.Write(reply(int32(binary.BigEndian.Uint32(h[8:]))))
		_, _ = io.Copy(io.Discard, br)
	}
}

// answerFramed answers the first framed call with reply(seqid), then
// drains; close makes it hang up right after.
func answerFramed(reply func(seq int32) []byte, close bool) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		seq, err := readFramed(br)
		if err != nil {
			return
		}
		_, _ = c.Write(reply(seq))
		if close {
			_ = c.Close()
			return
		}
		_, _ = io.Copy(io.Discard, br)
	}
}

func pingReply(seq int32) []byte {
	msg, _ := proto.EncodeFramedMessage(proto.Binary, nil, "ping", proto.Reply, seq, &testutil.EmptyStruct{})
	return msg
}

// TestHostileServer: whatever a server does, a HatRPC client call ends with
// an error within its deadline and without trusting hostile lengths.
func TestHostileServer(t *testing.T) {
	plain := []client.Option{client.WithoutUpgrade(), client.WithFramed()}
	silent := func(_ net.Conn, br *bufio.Reader) { _, _ = io.Copy(io.Discard, br) }
	tests := []struct {
		name     string
		script   func(net.Conn, *bufio.Reader)
		opts     []client.Option
		upgraded bool
	}{
		{"silent server", silent, plain, false},
		{"reply frame length 2GiB-1", answerFramed(func(int32) []byte {
			return cat(be32(1<<31-1), []byte{0x80, 0x01, 0x00, 0x02})
		}, false), plain, false},
		{"reply garbage", answerFramed(func(int32) []byte { return []byte("HTTP/1.1 400 Bad Request\r\n\r\n") }, false), plain, false},
		{"hang up mid-reply", answerFramed(func(seq int32) []byte { r := pingReply(seq); return r[:len(r)/2] }, true), plain, false},
		{"reply for another seqid", answerFramed(func(seq int32) []byte { return pingReply(seq + 1000) }, false), plain, false},
		{"hatrpc frame length 2GiB-1", upgradeThen(func(seq int32) []byte {
			h := make([]byte, wire.HeaderSize)
			binary.BigEndian.PutUint32(h, 1<<31-1)
			h[4] = byte(wire.KindReply)
			binary.BigEndian.PutUint32(h[8:], uint32(seq))
			return h
		}), []client.Option{client.WithFramed()}, true},
		{"hatrpc bad frame kind", upgradeThen(func(seq int32) []byte {
			h := make([]byte, wire.HeaderSize)
			binary.BigEndian.PutUint32(h, wire.HeaderSize-4)
			h[4] = 42
			return h
		}), []client.Option{client.WithFramed()}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := hostileServer(t, tt.script)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
			defer cancel()
			c, err := client.Dial(ctx, addr, tt.opts...)
			require.NoError(t, err)
			defer c.Close()
			// The scripts that answer the handshake must really have moved
			// the client to HatRPC framing; the others must not have.
			assert.Equal(t, tt.upgraded, c.Upgraded())

			callCtx, cancelCall := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancelCall()
			start := time.Now()
			err = c.Call(callCtx, testutil.PingMethod, &testutil.EmptyStruct{}, &testutil.EmptyStruct{})
			elapsed := time.Since(start)
			runtime.ReadMemStats(&m1)

			require.Error(t, err, "a hostile server's answer was accepted")
			t.Logf("error after %v: %v", elapsed.Round(time.Millisecond), err)
			assert.Less(t, elapsed, 5*time.Second, "the call outlived its deadline")
			assert.Less(t, m1.TotalAlloc-m0.TotalAlloc, uint64(allocBound),
				"the reply made the client allocate %d MiB", (m1.TotalAlloc-m0.TotalAlloc)>>20)
		})
	}

	t.Run("silent server during handshake", func(t *testing.T) {
		addr := hostileServer(t, silent)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
		defer cancel()
		start := time.Now()
		c, err := client.Dial(ctx, addr, client.WithHandshakeTimeout(300*time.Millisecond))
		if err == nil {
			// A client may also give up on the upgrade and fall back to plain
			// Thrift; then the first call must still fail by its deadline.
			defer c.Close()
			callCtx, cancelCall := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancelCall()
			err = c.Call(callCtx, testutil.PingMethod, &testutil.EmptyStruct{}, &testutil.EmptyStruct{})
		}
		require.Error(t, err)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
}
