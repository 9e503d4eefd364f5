package client_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// statusErrors answers an echo whose message names a failure with it,
// before the handler runs, as a handler would.
func statusErrors(ctx context.Context, _ *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
	switch args.(*wiretest.EchoArgs).Msg {
	case "status":
		return nil, status.New(codes.NotFound, "no user u1").WithDetails("user", "u1", "shard", "7")
	case "user":
		return nil, status.Error(codes.User+7, "quota of plan basic")
	case "plain":
		return nil, errors.New("disk on fire")
	case "deadline":
		return nil, context.DeadlineExceeded
	}
	return next(ctx, args)
}

// statusServer serves wiretest's Echo behind statusErrors, logging to
// the returned buffer; lanes turns the fast path on.
func statusServer(t *testing.T, lanes bool) (*testServer, *syncBuf) {
	t.Helper()
	logs := new(syncBuf)
	opts := []server.Option{server.WithInterceptors(statusErrors),
		server.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))}
	if lanes {
		return laneServer(t, opts...), logs
	}
	return serve(t, "", opts...), logs
}

// A status error crosses every route between HatRPC peers with its code,
// message and details; an undeclared handler error arrives as Internal
// and the server logs it at Warn with the request id; a handler's context
// error keeps its code.
func TestStatusErrorsEveryRoute(t *testing.T) {
	flock := hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64}
	routes := []struct {
		name   string
		lanes  bool
		opts   []client.Option
		client hints.Set
	}{
		{"tcp", false, nil, hints.Set{}},
		{"tcp-no-request-ids", false, []client.Option{client.WithoutRequestIDs()}, hints.Set{}},
		{"theader", false, []client.Option{client.WithTHeader()}, hints.Set{}},
		{"lane", true, []client.Option{client.WithoutRequestIDs()}, hints.Set{}},
		{"flock", true, nil, flock},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			ts, logs := statusServer(t, rt.lanes)
			c := dial(t, ts.addr, rt.opts...)
			m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo", Client: rt.client,
				Server: hints.Set{PayloadSize: 64}}}
			call := func(ctx context.Context, msg string) error {
				return c.Call(ctx, m, &wiretest.EchoArgs{Msg: msg}, &wiretest.EchoResult{})
			}

			err := call(tctx(t), "status")
			var st *status.Status
			require.ErrorAs(t, err, &st)
			assert.Equal(t, codes.NotFound, st.Code())
			assert.Equal(t, "no user u1", st.Message())
			assert.Equal(t, map[string]string{"user": "u1", "shard": "7"}, st.Details())
			assert.EqualError(t, err, "status NotFound: no user u1")
			assert.ErrorIs(t, err, status.Error(codes.NotFound, ""))
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae, "the exception the status came in")
			assert.Equal(t, proto.ExcInternalError, ae.Type)

			err = call(tctx(t), "user")
			assert.Equal(t, codes.User+7, status.Code(err))
			assert.EqualError(t, err, "status User(1007): quota of plan basic")

			ctx := metadata.AppendToOutgoingContext(tctx(t), metadata.RequestIDKey, "rid-"+rt.name)
			err = call(ctx, "plain")
			assert.Equal(t, codes.Internal, status.Code(err))
			assert.EqualError(t, err, "status Internal: disk on fire")
			require.Contains(t, logs.String(), `level=WARN msg="hatrpc: handler error" method=echo`)
			require.Contains(t, logs.String(), "request_id=rid-"+rt.name+" err=\"disk on fire\"")

			err = call(tctx(t), "deadline")
			assert.Equal(t, codes.DeadlineExceeded, status.Code(err))

			// Other calls on the route are untouched.
			var res wiretest.EchoResult
			require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "ok"}, &res))
			require.Equal(t, "ok", *res.Success)
			// The server's outcome label is the code's, on the route the calls took.
			tr := "tcp"
			switch {
			case rt.lanes:
				tr = fastpathtest.Transport()
			case rt.name == "theader":
				tr = "thrift"
			}
			for _, o := range []string{"not_found", "user_code", "internal_error", "deadline"} {
				assert.Equal(t, 1.0, errorsOn(t, ts, tr, o), "outcome %s on %s", o, tr)
			}
			assert.Equal(t, 5.0, callsOn(t, ts, tr), "every call ran on %s", tr)
		})
	}
}

// errorsOn reads hatrpc_server_errors_total of echo on transport tr with
// outcome o.
func errorsOn(t *testing.T, ts *testServer, tr, o string) float64 {
	t.Helper()
	return serverCounter(t, ts, "hatrpc_server_errors_total", map[string]string{"function": "echo", "transport": tr, "outcome": o})
}

// serverCounter sums the server's counter name over the series whose
// labels include want.
func serverCounter(t *testing.T, ts *testServer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := ts.srv.Registry().Gather()
	require.NoError(t, err)
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			match := true
			for k, v := range want {
				match = match && labels[k] == v
			}
			if match {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// An Apache Go client sees a status error as the application exception
// it is on the wire, with the message; over THeader it also gets the code
// and details as info headers.
func TestStatusErrorApacheClient(t *testing.T) {
	ts, _ := statusServer(t, false)
	conf := &thrift.TConfiguration{ConnectTimeout: testenv.HangGuard(5 * time.Second), SocketTimeout: testenv.HangGuard(10 * time.Second)}
	sock := thrift.NewTSocketConf(ts.addr, conf)
	require.NoError(t, sock.Open())
	defer sock.Close()
	p := thrift.NewTBinaryProtocolConf(sock, conf)
	ac := thrift.NewTStandardClient(p, p)
	for _, tc := range []struct{ msg, text string }{{"status", "no user u1"}, {"plain", "disk on fire"}} {
		_, err := ac.Call(tctx(t), "echo", &wiretest.ApacheEchoArgs{Msg: tc.msg}, &wiretest.ApacheEchoResult{})
		var aex thrift.TApplicationException
		require.ErrorAs(t, err, &aex)
		assert.Equal(t, int32(thrift.INTERNAL_ERROR), aex.TypeId())
		assert.Equal(t, tc.text, aex.Error())
	}

	th, err := wiretest.DialApacheTHeader(ts.addr, thrift.THeaderProtocolBinary, false)
	require.NoError(t, err)
	defer th.Close()
	var res wiretest.ApacheEchoResult
	_, err = th.Client.Call(tctx(t), "echo", &wiretest.ApacheEchoArgs{Msg: "status"}, &res)
	var aex thrift.TApplicationException
	require.ErrorAs(t, err, &aex)
	assert.Equal(t, "no user u1", aex.Error())
	got := th.Proto.GetReadHeaders()
	assert.Equal(t, "5", got[status.HeaderCode])
	assert.Equal(t, "u1", got[status.HeaderDetailPrefix+"user"])
}

// Over plain Thrift a status has no headers to ride: the client derives
// the code from the exception's type.
func TestStatusErrorPlainThrift(t *testing.T) {
	ts, _ := statusServer(t, false)
	c := dial(t, ts.addr, client.WithoutUpgrade())
	require.False(t, c.Upgraded())
	err := c.Call(tctx(t), wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "status"}, &wiretest.EchoResult{})
	_, isStatus := status.FromError(err)
	assert.False(t, isStatus)
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.True(t, strings.HasSuffix(err.Error(), "no user u1"), err.Error())
}
