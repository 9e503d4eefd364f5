package client_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// FuzzClientStreamFrames has a fake server grant streams and answer a
// stream's open with arbitrary bytes, then hang up: whatever they hold,
// the client must not crash, and the stream must end.
func FuzzClientStreamFrames(f *testing.F) {
	codec := wire.GetCodec()
	data, _ := codec.AppendStruct(wire.AppendHeaderBlock(make([]byte, wire.HeaderSize), metadata.Pairs("k", "v")),
		proto.Binary, &wiretest.EchoArgs{Msg: "m"})
	wire.SealFrame(data, wire.KindStreamData, wire.FlagHeaders, 1, 0)
	ok := "fine"
	end, _ := codec.AppendMessage(make([]byte, wire.HeaderSize), proto.Binary, "echo", proto.Reply, 1, &wiretest.EchoResult{Success: &ok})
	wire.SealFrame(end, wire.KindStreamEnd, 0, 1, 0)
	wire.PutCodec(codec)
	f.Add(append(append([]byte(nil), data...), end...))
	f.Add(append(append([]byte(nil), data...), wire.AppendResetFrame(nil, 1, 1, "no")...))
	f.Add(append(wire.AppendWindowFrame(nil, 1, 1, 1), data...))
	f.Add(append(append([]byte(nil), data...), data...))
	m := &client.Method{Service: "S", Name: "echo", Stream: stream.Bidi}
	// One listener for the run: a fresh one per input would soon find
	// no free port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ln.Close() })
	f.Fuzz(func(t *testing.T, in []byte) {
		served := make(chan struct{})
		go func() {
			defer close(served)
			fakeStreamServer(ln, in)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
		defer cancel()
		c, err := client.Dial(ctx, ln.Addr().String(), client.WithConns(1))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st, err := c.NewStream(ctx, m, &wiretest.EchoResult{})
		if err != nil {
			// The open went out, but the connection broke on the
			// frames behind it before the write call returned.
			if !errors.Is(err, client.ErrConnClosed) {
				t.Fatal(err)
			}
			c.Close()
			<-served
			return
		}
		for i := 0; ; i++ {
			if err := st.RecvMsg(&wiretest.EchoArgs{}); err != nil {
				if ctx.Err() != nil {
					t.Fatalf("the stream did not end with its connection: %v", err)
				}
				break
			}
			if i > len(in) {
				t.Fatalf("more messages than frames")
			}
		}
		c.Close()
		<-served
	})
}

// fakeStreamServer grants streams to one client, writes out after its
// first frame and hangs up.
func fakeStreamServer(ln net.Listener, out []byte) {
	nc, err := ln.Accept()
	if err != nil {
		return
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(testenv.HangGuard(10 * time.Second)))
	br := bufio.NewReader(nc)
	msg, err := wire.ReadMessage(br, wire.Format{Proto: proto.Binary}, nil, nil)
	if err != nil {
		return
	}
	mh, err := wire.ParseMsgHeader(proto.Binary, msg)
	if err != nil {
		return
	}
	codec := wire.GetCodec()
	rep, _ := codec.AppendMessage(nil, proto.Binary, string(mh.Name), proto.Reply, mh.Seqid,
		&wire.HelloReply{Version: wire.Version, Caps: wire.CapFraming | wire.CapStreams, Transport: "tcp", MaxFrame: 1 << 20})
	wire.PutCodec(codec)
	if _, err := nc.Write(rep); err != nil {
		return
	}
	if _, _, err := wire.ReadFrame(br, nil, 1<<20); err != nil {
		return
	}
	_, _ = nc.Write(out)
}
