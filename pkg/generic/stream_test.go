package generic_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/examples/stream/gen/logs"
	"github.com/hatrpc/hatrpc/examples/stream/gen/logs/logsserver"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testutil"
)

func logsIDL() string {
	return filepath.Join(testutil.TestdataDir(), "..", "..", "examples", "stream", "logs.thrift")
}

func loadLogs(t testing.TB) *generic.Service {
	t.Helper()
	d, err := generic.Load(logsIDL())
	require.NoError(t, err)
	svc, err := d.Service("Logs")
	require.NoError(t, err)
	return svc
}

// logsHandler is the generated-code side of the tests: tail sends
// req.last lines of "app" (NoSuchSource for another source), upload sums
// chunks (QuotaExceeded past 10 bytes), chat answers every message.
type logsHandler struct{}

func (logsHandler) Tail(req *logs.TailRequest, st logs.LogsTailServer) error {
	if req.Source != "app" {
		return &logs.NoSuchSource{Source: req.Source}
	}
	st.SetTrailer(metadata.Pairs("lines", fmt.Sprint(req.Last)))
	for i := range req.Last {
		if err := st.Send(&logs.Line{Seq: int64(i), Text: fmt.Sprintf("line %d", i)}); err != nil {
			return err
		}
	}
	return nil
}

func (logsHandler) Upload(st logs.LogsUploadServer) error {
	var sum logs.UploadSummary
	for {
		c, err := st.Recv()
		if err == io.EOF {
			return st.SendAndClose(&sum)
		}
		if err != nil {
			return err
		}
		if sum.Bytes += int64(len(c.Data)); sum.Bytes > 10 {
			return &logs.QuotaExceeded{LimitBytes: 10}
		}
		sum.Chunks++
	}
}

func (logsHandler) Chat(st logs.LogsChatServer) error {
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(&logs.ChatMessage{Author: "server", Text: "heard " + m.Text}); err != nil {
			return err
		}
	}
}

func (logsHandler) Count(context.Context, string) (int64, error) { return 7, nil }

// genericLogs is the same behaviour as logsHandler written against the
// generic server's JSON.
func genericLogs(_ context.Context, method string, st *generic.ServerStream) ([]byte, error) {
	switch method {
	case "tail":
		req, err := st.Recv()
		if err != nil {
			return nil, err
		}
		if req["source"] != "app" {
			return nil, &generic.Exception{Type: "NoSuchSource", Value: map[string]any{"source": req["source"]}}
		}
		n := req["last"].(int32)
		st.SetTrailer(metadata.Pairs("lines", fmt.Sprint(n)))
		for i := range n {
			if err := st.SendJSON(fmt.Appendf(nil, `{"seq":%d,"text":"line %d"}`, i, i)); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case "upload":
		var chunks, n int
		for {
			c, err := st.Recv()
			if err == io.EOF {
				return fmt.Appendf(nil, `{"chunks":%d,"bytes":%d}`, chunks, n), nil
			}
			if err != nil {
				return nil, err
			}
			if n += len(c["data"].([]byte)); n > 10 {
				return nil, &generic.Exception{Field: "quota", JSON: []byte(`{"limit_bytes":10}`)}
			}
			chunks++
		}
	case "chat":
		for {
			m, err := st.Recv()
			if err == io.EOF {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			if err := st.Send(map[string]any{"author": "server", "text": "heard " + m["text"].(string)}); err != nil {
				return nil, err
			}
		}
	}
	return nil, fmt.Errorf("no stream %s", method)
}

func genericUnary(context.Context, string, []byte) ([]byte, error) { return []byte("7"), nil }

// TestGenericStreams runs every stream shape both ways: the generic client
// against a generated server, and a generated client against a generic
// server, over TCP and on lanes.
func TestGenericStreams(t *testing.T) {
	svc := loadLogs(t)
	servers := []struct {
		name    string
		service func() *server.Service
	}{
		{"generated-server", func() *server.Service { return logsserver.NewLogsService(logsHandler{}) }},
		{"generic-server", func() *server.Service { return svc.Server(genericUnary, generic.WithStreamHandler(genericLogs)) }},
	}
	for _, sv := range servers {
		for _, rdma := range []string{"", fastpathtest.Provider()} {
			t.Run(sv.name+"/rdma="+rdma, func(t *testing.T) {
				srv := testutil.StartServer(t, []*server.Service{sv.service()}, server.WithRDMA(rdma))
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				conn, err := client.Dial(ctx, srv.Addr, client.WithRDMA(rdma), client.WithHints(svc.Hints))
				require.NoError(t, err)
				defer conn.Close()
				checkGenericClient(ctx, t, generic.NewClient(svc, conn))
				checkGeneratedClient(ctx, t, logs.NewLogsClient(conn))
				// Every stream is planned on lanes when there are any:
				// the 4 tail streams (server streams, a lane each), the
				// 3 uploads and the 2 chats (client and bidirectional,
				// two lanes each); none found its lanes busy.
				lane, tcp := conn.StreamRoutes()
				if rdma == "" {
					assert.Zero(t, lane)
				} else {
					assert.Equal(t, uint64(9), lane, "streams on lanes")
				}
				assert.Zero(t, tcp)
			})
		}
	}
}

func checkGenericClient(ctx context.Context, t *testing.T, gc *generic.Client) {
	// Server stream: one request, 3 lines, a clean end with a trailer.
	st, err := gc.Stream(ctx, "tail")
	require.NoError(t, err)
	require.NoError(t, st.SendJSON([]byte(`{"source":"app","last":3}`)))
	require.NoError(t, st.CloseSend())
	var got []string
	for {
		b, err := st.RecvJSON()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, string(b))
	}
	assert.Equal(t, []string{`{"seq":0,"text":"line 0"}`, `{"seq":1,"text":"line 1"}`, `{"seq":2,"text":"line 2"}`}, got)
	assert.Equal(t, "3", st.Trailer()["lines"])

	// The declared exception that ends a server stream.
	st, err = gc.Stream(ctx, "tail")
	require.NoError(t, err)
	require.NoError(t, st.Send(map[string]any{"source": "nope", "last": int32(1)}))
	require.NoError(t, st.CloseSend())
	_, err = st.Recv()
	var ex *generic.Exception
	require.ErrorAs(t, err, &ex)
	assert.Equal(t, "NoSuchSource", ex.Type)
	assert.Equal(t, "missing", ex.Field)
	assert.JSONEq(t, `{"source":"nope"}`, string(ex.JSON))

	// Client stream: a value that does not match the IDL is refused before
	// it is sent and the stream goes on; then the reply.
	st, err = gc.Stream(ctx, "upload")
	require.NoError(t, err)
	var ve *generic.ValueError
	require.ErrorAs(t, st.SendJSON([]byte(`{"source":"app","data":7}`)), &ve)
	assert.Equal(t, "msg.data: want base64 string, got number", ve.Error())
	for _, c := range []string{"abc", "de"} {
		require.NoError(t, st.Send(map[string]any{"source": "app", "data": []byte(c)}))
	}
	reply, err := st.CloseAndRecvJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"chunks":2,"bytes":5}`, string(reply))

	st, err = gc.Stream(ctx, "upload")
	require.NoError(t, err)
	require.NoError(t, st.Send(map[string]any{"source": "app", "data": []byte("0123456789ab")}))
	_, err = st.CloseAndRecv()
	require.ErrorAs(t, err, &ex)
	assert.Equal(t, "QuotaExceeded", ex.Type)
	assert.JSONEq(t, `{"limit_bytes":10}`, string(ex.JSON))

	// Bidirectional: every message answered, then a clean end.
	st, err = gc.Stream(ctx, "chat")
	require.NoError(t, err)
	for _, text := range []string{"hi", "there"} {
		require.NoError(t, st.Send(map[string]any{"author": "me", "text": text}))
		m, err := st.Recv()
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"author": "server", "text": "heard " + text}, m)
	}
	require.NoError(t, st.CloseSend())
	_, err = st.Recv()
	require.ErrorIs(t, err, io.EOF)

	// The unary function next to the streams.
	out, err := gc.CallJSON(ctx, "count", []byte(`{"source":"app"}`))
	require.NoError(t, err)
	assert.Equal(t, "7", string(out))
}

func checkGeneratedClient(ctx context.Context, t *testing.T, lc *logs.LogsClient) {
	tail, err := lc.Tail(ctx, &logs.TailRequest{Source: "app", Last: 2})
	require.NoError(t, err)
	for i := range 2 {
		l, err := tail.Recv()
		require.NoError(t, err)
		assert.Equal(t, &logs.Line{Seq: int64(i), Text: fmt.Sprintf("line %d", i)}, l)
	}
	_, err = tail.Recv()
	require.ErrorIs(t, err, io.EOF)

	tail, err = lc.Tail(ctx, &logs.TailRequest{Source: "nope", Last: 2})
	require.NoError(t, err)
	_, err = tail.Recv()
	var missing *logs.NoSuchSource
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, "nope", missing.Source)

	up, err := lc.Upload(ctx)
	require.NoError(t, err)
	require.NoError(t, up.Send(&logs.Chunk{Source: "app", Data: []byte("abcd")}))
	sum, err := up.CloseAndRecv()
	require.NoError(t, err)
	assert.Equal(t, &logs.UploadSummary{Chunks: 1, Bytes: 4}, sum)

	chat, err := lc.Chat(ctx)
	require.NoError(t, err)
	require.NoError(t, chat.Send(&logs.ChatMessage{Author: "me", Text: "yo"}))
	m, err := chat.Recv()
	require.NoError(t, err)
	assert.Equal(t, "heard yo", m.Text)
	require.NoError(t, chat.CloseSend())
	_, err = chat.Recv()
	require.ErrorIs(t, err, io.EOF)
}

// TestGenericStreamMisuse: each way of using a stream wrongly gets an
// error that says what to do instead.
func TestGenericStreamMisuse(t *testing.T) {
	svc := loadLogs(t)
	srv := testutil.StartServer(t, []*server.Service{svc.Server(genericUnary)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, srv.Addr)
	require.NoError(t, err)
	defer conn.Close()
	gc := generic.NewClient(svc, conn)

	_, err = gc.CallJSON(ctx, "tail", []byte(`{"req":{"source":"app"}}`))
	require.EqualError(t, err, "generic: Logs.tail streams (server): open it with Stream")
	_, err = gc.Stream(ctx, "count")
	require.EqualError(t, err, "generic: Logs.count is not a streaming function: call it")

	st, err := gc.Stream(ctx, "chat")
	require.NoError(t, err)
	_, err = st.CloseAndRecv()
	require.EqualError(t, err, "generic: CloseAndRecv is for client streams; chat streams bidirectional: Recv until io.EOF")
	require.NoError(t, st.CloseSend())
	// A generic server without a stream handler answers every stream so.
	_, err = st.Recv()
	var ae *proto.ApplicationException
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, "generic: chat streams and the server has no stream handler (generic.WithStreamHandler)", ae.Message)

	// A stream through a Caller that opens none.
	_, err = generic.NewClient(svc, callerOnly{conn}).Stream(ctx, "chat")
	require.ErrorContains(t, err, "opens no streams")
}

// callerOnly hides the Conn's Streamer.
type callerOnly struct{ client.Caller }
