package roundtrip_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/streams/streams"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/streams/streams/base"
	"github.com/hatrpc/hatrpc/internal/codegen/testdata/golden/streams/streams/streamsserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// streamer implements streams.StreamerHandler: every stream shape, each
// ending cleanly, with a declared exception or with another error as its
// messages ask.
type streamer struct {
	canceled chan error // Tail with Q "block" says nil when it blocks, then its context's end
}

func (streamer) Ticks(from *base.Tick, s base.ClockTicksServer) error {
	for i := int64(0); i < 3; i++ {
		if err := s.Send(&base.Tick{N: from.N + i}); err != nil {
			return err
		}
	}
	return nil
}

func (h streamer) Tail(req *streams.Req, s streams.StreamerTailServer) error {
	if err := s.SendHeader(metadata.Pairs("q", req.Q)); err != nil {
		return err
	}
	s.SetTrailer(metadata.Pairs("sent", "all"))
	for i := int32(0); i < req.N; i++ {
		if err := s.Send(&streams.Resp{A: req.Q, Seq: &i}); err != nil {
			return err
		}
	}
	switch req.Q {
	case "fail":
		return errors.New("tail broke")
	case "block":
		h.canceled <- nil // blocking now: cancel
		<-s.Context().Done()
		h.canceled <- s.Context().Err()
		return s.Context().Err()
	}
	return nil
}

func (streamer) Upload(s streams.StreamerUploadServer) error {
	var all []string
	for {
		m, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch m.Q {
		case "oops":
			return &streams.Oops{Why: "chunk " + m.Q}
		case "none": // ends without a reply
			return nil
		}
		if len(all) == int(m.N) {
			return &streams.TooMany{Limit: m.N}
		}
		all = append(all, m.Q)
	}
	if err := s.SendAndClose(&streams.Resp{A: strings.Join(all, "+")}); err != nil {
		return err
	}
	if err := s.SendAndClose(&streams.Resp{}); err == nil || err.Error() != "Streamer.upload: SendAndClose called twice" {
		return errors.New("a second SendAndClose was not refused")
	}
	return nil
}

func (streamer) Chat(s streams.StreamerChatServer) error {
	m := new(streams.Req) // every message read into it (Upload reads by Recv)
	for i := int32(0); ; i++ {
		err := s.RecvInto(m)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if m.Q == "bye" {
			return &streams.Oops{Why: "bye"}
		}
		if err := s.Send(&streams.Resp{A: "re: " + m.Q, Seq: &i}); err != nil {
			return err
		}
	}
}

func (streamer) Call(_ context.Context, req *streams.Req) (*streams.Resp, error) {
	return &streams.Resp{A: req.Q}, nil
}

func (streamer) Note(context.Context, string) error { return nil }

func (streamer) Watch(req *streams.Req, s streams.StreamerWatchServer) error {
	return s.Send(&streams.Resp{A: "watched " + req.Q})
}

// streamClientFunc serves h and returns a client of it.
type streamClientFunc func(t *testing.T, h streams.StreamerHandler) *streams.StreamerClient

// newFakeClient serves h through the fake streamer.
func newFakeClient(t *testing.T, h streams.StreamerHandler) *streams.StreamerClient {
	f := &fakeStreamer{svc: streamsserver.NewStreamerService(h)}
	t.Cleanup(f.wait)
	return streams.NewStreamerClient(f)
}

// TestStreamsFake runs the stream suite over the in-memory fake; the same
// suite runs over the runtime's TCP streams.
func TestStreamsFake(t *testing.T) { streamSuite(t, newFakeClient) }

// streamSuite checks what the generated wrappers make of a runtime's
// streams, served by newClient.
func streamSuite(t *testing.T, newClient streamClientFunc) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, streamClientFunc)
	}{
		{"ServerStream", testServerStream},
		{"ServerStreamArgNamedStream", testServerStreamArgNamedStream},
		{"ServerStreamInherited", testServerStreamInherited},
		{"ServerStreamHandlerError", testServerStreamHandlerError},
		{"ServerStreamCanceled", testServerStreamCanceled},
		{"ClientStream", testClientStream},
		{"BidiStream", testBidiStream},
		{"BidiStreamDeclaredException", testBidiStreamDeclaredException},
		{"RecvInto", testRecvInto},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newClient) })
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestStreamMethodsRegistered(t *testing.T) {
	svc := streamsserver.NewStreamerService(streamer{})
	want := map[string]stream.Mode{"ticks": stream.Server, "tail": stream.Server, "upload": stream.Client, "chat": stream.Bidi, "call": stream.None, "watch": stream.Server, "note": stream.None}
	require.Len(t, svc.Methods, len(want))
	for _, m := range svc.Methods {
		assert.Equal(t, want[m.Name], m.Stream, m.Name)
		if m.Stream == stream.None {
			assert.Nil(t, m.HandleStream, m.Name)
			assert.NotNil(t, m.Handle, m.Name)
			continue
		}
		// The server, not generated code, answers a unary call of a stream.
		assert.NotNil(t, m.HandleStream, m.Name)
		assert.Nil(t, m.Handle, m.Name)
		assert.Nil(t, m.NewArgs, m.Name)
		assert.Equal(t, m.Name, m.Hints.Name, "hints baked in as for unary functions")
	}
}

func testServerStream(t *testing.T, newStreamClient streamClientFunc) {
	ctx := testCtx(t)
	c := newStreamClient(t, streamer{})
	s, err := c.Tail(ctx, &streams.Req{Q: "x", N: 3})
	require.NoError(t, err)
	for i := int32(0); i < 3; i++ {
		m, err := s.Recv()
		require.NoError(t, err)
		assert.Equal(t, "x", m.A)
		assert.Equal(t, i, m.GetSeq())
	}
	_, err = s.Recv()
	assert.Equal(t, io.EOF, err)
	_, err = s.Recv()
	assert.Equal(t, io.EOF, err, "Recv after the end keeps saying io.EOF")
	hd, err := s.Header()
	require.NoError(t, err)
	assert.Equal(t, metadata.MD{"q": "x"}, hd)
	assert.Equal(t, metadata.MD{"sent": "all"}, s.Trailer())
}

// TestServerStreamArgNamedStream: an argument named stream does not hide
// package stream in the generated method.
func testServerStreamArgNamedStream(t *testing.T, newStreamClient streamClientFunc) {
	c := newStreamClient(t, streamer{})
	s, err := c.Watch(testCtx(t), &streams.Req{Q: "w"})
	require.NoError(t, err)
	m, err := s.Recv()
	require.NoError(t, err)
	assert.Equal(t, "watched w", m.A)
	_, err = s.Recv()
	assert.Equal(t, io.EOF, err)
}

func testServerStreamInherited(t *testing.T, newStreamClient streamClientFunc) {
	c := newStreamClient(t, streamer{})
	s, err := c.Ticks(testCtx(t), &base.Tick{N: 40})
	require.NoError(t, err)
	var got []int64
	for {
		m, err := s.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, m.N)
	}
	assert.Equal(t, []int64{40, 41, 42}, got)
}

func testServerStreamHandlerError(t *testing.T, newStreamClient streamClientFunc) {
	c := newStreamClient(t, streamer{})
	s, err := c.Tail(testCtx(t), &streams.Req{Q: "fail", N: 1})
	require.NoError(t, err)
	_, err = s.Recv()
	require.NoError(t, err, "the message sent before the error arrives")
	_, err = s.Recv()
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae, "an undeclared error travels as an application exception")
	assert.Equal(t, proto.ExcInternalError, ae.Type)
	assert.Equal(t, "tail broke", ae.Message)
}

func testServerStreamCanceled(t *testing.T, newStreamClient streamClientFunc) {
	h := streamer{canceled: make(chan error, 1)}
	c := newStreamClient(t, h)
	ctx, cancel := context.WithCancel(testCtx(t))
	s, err := c.Tail(ctx, &streams.Req{Q: "block"})
	require.NoError(t, err)
	// Canceled before the handler ran, a stream ends without running it;
	// this checks the context a running handler sees.
	require.NoError(t, <-h.canceled)
	cancel()
	_, err = s.Recv()
	assert.ErrorIs(t, err, context.Canceled)
	select {
	case err := <-h.canceled:
		assert.ErrorIs(t, err, context.Canceled, "the handler's stream context ended")
	case <-time.After(time.Minute):
		t.Fatal("the handler never saw the cancellation")
	}
}

func testClientStream(t *testing.T, newStreamClient streamClientFunc) {
	tests := []struct {
		name   string
		chunks []string
		limit  int32
		want   string
		check  func(t *testing.T, err error)
	}{
		{name: "reply", chunks: []string{"a", "b", "c"}, limit: 10, want: "a+b+c"},
		{name: "no chunks", limit: 10, want: ""},
		{name: "declared exception", chunks: []string{"a", "oops", "never read"}, limit: 10, check: func(t *testing.T, err error) {
			var e *streams.Oops
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "chunk oops", e.Why)
		}},
		{name: "second declared exception", chunks: []string{"a", "b", "c"}, limit: 2, check: func(t *testing.T, err error) {
			var e *streams.TooMany
			require.ErrorAs(t, err, &e)
			assert.Equal(t, int32(2), e.Limit)
		}},
		{name: "no reply", chunks: []string{"none"}, limit: 10, check: func(t *testing.T, err error) {
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, proto.ExcMissingResult, ae.Type)
			assert.Equal(t, "upload failed: unknown result", ae.Message)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newStreamClient(t, streamer{})
			s, err := c.Upload(testCtx(t))
			require.NoError(t, err)
			ended := false
			for _, q := range tc.chunks {
				err := s.Send(&streams.Req{Q: q, N: tc.limit})
				if ended {
					// The client may not know yet that the stream ended
					// (the message is then dropped); once it does, io.EOF.
					if err != nil {
						assert.Equal(t, io.EOF, err, "Send after the server ended the stream")
					}
				} else {
					require.NoError(t, err)
				}
				ended = ended || q == "oops"
			}
			r, err := s.CloseAndRecv()
			if tc.check != nil {
				assert.Nil(t, r)
				tc.check(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, r.A)
		})
	}
}

func testBidiStream(t *testing.T, newStreamClient streamClientFunc) {
	c := newStreamClient(t, streamer{})
	s, err := c.Chat(testCtx(t))
	require.NoError(t, err)
	for i, q := range []string{"hi", "there"} {
		require.NoError(t, s.Send(&streams.Req{Q: q}))
		m, err := s.Recv()
		require.NoError(t, err)
		assert.Equal(t, "re: "+q, m.A)
		assert.Equal(t, int32(i), m.GetSeq())
	}
	require.NoError(t, s.CloseSend())
	_, err = s.Recv()
	assert.Equal(t, io.EOF, err)
}

func testBidiStreamDeclaredException(t *testing.T, newStreamClient streamClientFunc) {
	c := newStreamClient(t, streamer{})
	s, err := c.Chat(testCtx(t))
	require.NoError(t, err)
	require.NoError(t, s.Send(&streams.Req{Q: "bye"}))
	_, err = s.Recv()
	var e *streams.Oops
	require.ErrorAs(t, err, &e, "the exception arrives after the stream's messages, from Recv")
	assert.Equal(t, "bye", e.Why)
	assert.Equal(t, io.EOF, s.Send(&streams.Req{Q: "late"}), "Send after the end")
}

// RecvInto reads each message into the one given, reset first (a field
// the message lacks is not the last message's), and ends as Recv does:
// io.EOF, or the declared exception the server ended with.
func testRecvInto(t *testing.T, newStreamClient streamClientFunc) {
	c := newStreamClient(t, streamer{})
	seq := int32(7)
	m := &streams.Resp{A: "stale", Seq: &seq}
	w, err := c.Watch(testCtx(t), &streams.Req{Q: "w"})
	require.NoError(t, err)
	require.NoError(t, w.RecvInto(m))
	assert.Equal(t, &streams.Resp{A: "watched w"}, m, "no seq: the stale one is gone")
	assert.Equal(t, io.EOF, w.RecvInto(m))

	s, err := c.Chat(testCtx(t))
	require.NoError(t, err)
	require.NoError(t, s.Send(&streams.Req{Q: "hi"}))
	require.NoError(t, s.RecvInto(m))
	assert.Equal(t, "re: hi", m.A)
	assert.Equal(t, int32(0), m.GetSeq())
	require.NoError(t, s.Send(&streams.Req{Q: "bye"}))
	var e *streams.Oops
	require.ErrorAs(t, s.RecvInto(m), &e)
	assert.Equal(t, "bye", e.Why)
}

// unaryOnly is a Caller that opens no streams (an HTTP client, a test fake).
type unaryOnly struct{ client.Caller }

func TestStreamNeedsStreamer(t *testing.T) {
	c := streams.NewStreamerClient(unaryOnly{})
	ctx := testCtx(t)
	_, err := c.Tail(ctx, &streams.Req{})
	require.ErrorIs(t, err, stream.ErrNeedsHatRPCPeer)
	assert.Equal(t, "Streamer.tail: roundtrip_test.unaryOnly opens no streams: stream: streaming needs a HatRPC peer", err.Error())
	_, err = c.Upload(ctx)
	assert.ErrorIs(t, err, stream.ErrNeedsHatRPCPeer)
	_, err = c.Chat(ctx)
	assert.ErrorIs(t, err, stream.ErrNeedsHatRPCPeer)
}
