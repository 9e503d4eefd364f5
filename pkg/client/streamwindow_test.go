package client_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A server from before stream windows (no wire.CapStreamWindows in its
// hello reply) knows nothing of a c_hint stream_window: the client's
// open names none (no FlagWindow), and it takes what that server sends
// within the hello's window, past the hint, rather than reset the
// stream.
func TestStreamWindowOldServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	const n, blob = 8, 4 << 10 // 32 KiB: twice the hinted window
	opened := make(chan wire.Header, 1)
	served := make(chan error, 1)
	go func() { served <- oldStreamServer(ln, n, blob, opened) }()

	c, err := client.Dial(context.Background(), ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	m := &client.Method{Service: "S", Name: "count", Stream: stream.Server,
		Hints: &hints.Function{Name: "count", Client: hints.Set{StreamWindow: 16 << 10}, Stream: stream.Server}}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	st, err := c.NewStream(ctx, m, &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: n}))
	require.NoError(t, st.CloseSend())
	var h wire.Header
	select {
	case h = <-opened:
	case <-ctx.Done():
		t.Fatal("no open")
	}
	require.Zero(t, h.Flags&wire.FlagWindow, "an open with a window to a server that did not grant them")
	for i := range n {
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Equal(t, strconv.Itoa(i), a.Msg)
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	require.NoError(t, c.Close())
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("server stuck")
	}
}

// oldStreamServer answers one connection as a HatRPC server granting
// streams but not stream windows: it reports the open's header, waits for
// the client's message and end, sends n messages of blob bytes at once
// and a clean end, then reads whatever comes (credit) until the client
// goes.
func oldStreamServer(ln net.Listener, n, blob int, opened chan<- wire.Header) error {
	nc, err := ln.Accept()
	if err != nil {
		return err
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	msg, err := wire.ReadMessage(br, wire.Format{Proto: proto.Binary}, nil, nil)
	if err != nil {
		return err
	}
	mh, err := wire.ParseMsgHeader(proto.Binary, msg)
	if err != nil {
		return err
	}
	var hello wire.Hello
	if err := codec.Decode(proto.Binary, msg[mh.Body:], nil, &hello); err != nil {
		return err
	}
	rep, err := codec.AppendMessage(nil, proto.Binary, wire.HelloMethod, proto.Reply, mh.Seqid,
		&wire.HelloReply{Version: wire.Version, Caps: wire.CapFraming | wire.CapStreams, Transport: "tcp", MaxFrame: 1 << 30})
	if err != nil {
		return err
	}
	if _, err := nc.Write(rep); err != nil {
		return err
	}
	var id int32
	for done := false; !done; {
		h, _, err := wire.ReadFrame(br, nil, 1<<20)
		if err != nil {
			return err
		}
		switch h.Kind {
		case wire.KindStreamOpen:
			id = h.Seqid
			opened <- h
		case wire.KindStreamEnd:
			done = true
		}
	}
	var out []byte
	for i := range n {
		b, err := codec.AppendStruct(make([]byte, wire.HeaderSize), proto.Binary, &wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: make([]byte, blob)})
		if err != nil {
			return err
		}
		wire.SealFrame(b, wire.KindStreamData, 0, id, 0)
		out = append(out, b...)
	}
	end := make([]byte, wire.HeaderSize)
	wire.SealFrame(end, wire.KindStreamEnd, 0, id, 0)
	if _, err := nc.Write(append(out, end...)); err != nil {
		return err
	}
	for {
		if _, _, err := wire.ReadFrame(br, nil, 1<<20); err != nil {
			return nil // the client closed
		}
	}
}
