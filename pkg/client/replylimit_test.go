//go:build cgo && linux

package client_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// replyLimit is the test server's message limit: small, so a reply can
// pass it while its request is tiny.
const replyLimit = 1 << 20

var replyLimits = proto.Limits{MaxMessageSize: replyLimit, MaxDepth: 16, MaxStringLength: 4 << 20, MaxContainerSize: 1 << 16}

// A reply over the server's message limit is refused before it is sent:
// the call gets an application exception naming the size and the limit,
// on every route, and the connection goes on. A handler's exception
// (declared, or an application exception) past the limit is refused the
// same way, and every refusal is counted in
// hatrpc_server_rejected_total{reason="reply_too_large"}.
func TestReplyOverLimitRefused(t *testing.T) {
	routes := []struct {
		name  string
		lanes bool
		set   hints.Set
	}{
		{"tcp", false, hints.Set{}},
		{"lane", true, hints.Set{}},
		{"lane-rfp", true, hints.Set{Protocol: hints.ProtoRFP}},
		{"batch", true, hints.Set{Protocol: hints.ProtoRFP, Batch: 4, BatchTimeout: time.Millisecond}},
		{"flock", true, hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64}},
	}
	// 2,000 bytes repeated 1,024 times: a 2,048,000-byte string, as the
	// result, the declared exception's text or the application
	// exception's message.
	const n = 2000 * wiretest.RepeatTimes
	kinds := []struct {
		name string
		body proto.Struct
		typ  proto.MessageType
	}{
		{"result", overLimitResult("result", n), proto.Reply},
		{"declared", overLimitResult("declared", n), proto.Reply},
		{"application", overLimitResult("application", n), proto.Exception},
	}
	for _, rc := range routes {
		t.Run(rc.name, func(t *testing.T) {
			opts := []server.Option{server.WithLimits(replyLimits)}
			var ts *testServer
			if rc.lanes {
				ts = laneServer(t, opts...)
			} else {
				ts = serve(t, "", opts...)
			}
			ts.srv.Register(overLimitService())
			c := dial(t, ts.addr)
			m := &client.Method{Service: "Over", Name: "over", Hints: &hints.Function{Name: "over", Client: rc.set}}
			for i, kc := range kinds {
				var res wiretest.EchoResult
				err := c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: kc.name, DelayNs: n}, &res)
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae, kc.name)
				require.Equal(t, proto.ExcInternalError, ae.Type)
				got := regexp.MustCompile(fmt.Sprintf(`^hatrpc: reply of ([0-9]+) bytes exceeds the message limit of %d bytes$`, replyLimit)).FindStringSubmatch(ae.Message)
				require.NotNil(t, got, "%s: %.200s", kc.name, ae.Message)
				size, _ := strconv.Atoi(got[1])
				require.Contains(t, messageSizes(kc.typ, kc.body, "over", "Over:over"), size, "%s: the reply's exact size", kc.name)
				require.Equal(t, float64(i+1), serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "reply_too_large"}), kc.name)
				// The connection goes on: a reply within the limit arrives.
				res = wiretest.EchoResult{}
				require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "result", DelayNs: 100}, &res))
				require.Equal(t, strings.Repeat("r", 100), *res.Success)
			}
			tcpCalls := 0.0
			if !rc.lanes {
				tcpCalls = float64(2 * len(kinds))
			}
			require.Equal(t, tcpCalls, serverCounter(t, ts, "hatrpc_server_calls_total", map[string]string{"function": "over", "transport": "tcp"}), "calls on TCP")
		})
	}
}

// overLimitService answers over(Msg: kind, DelayNs: n) with n bytes as
// the kind says (overLimitResult): a result, the declared exception's
// text, or an application exception's message.
func overLimitService() *server.Service {
	return &server.Service{Name: "Over", Methods: []server.Method{{Name: "over", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
		Handle: func(_ context.Context, a proto.Struct) (proto.Struct, error) {
			args := a.(*wiretest.EchoArgs)
			res := overLimitResult(args.Msg, int(args.DelayNs))
			if exc, ok := res.(*proto.ApplicationException); ok {
				return nil, exc
			}
			return res, nil
		}}}}
}

func overLimitResult(kind string, n int) proto.Struct {
	switch kind {
	case "declared":
		return &wiretest.EchoResult{Err: &wiretest.EchoError{Code: 7, Why: strings.Repeat("d", n)}}
	case "application":
		return proto.NewApplicationException(proto.ExcUnknown, strings.Repeat("a", n))
	}
	s := strings.Repeat("r", n)
	return &wiretest.EchoResult{Success: &s}
}

// messageSizes is the size of body's message of type typ under each
// name, in binary and compact.
func messageSizes(typ proto.MessageType, body proto.Struct, names ...string) []int {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	var sizes []int
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, name := range names {
			b, err := codec.AppendMessage(nil, p, name, typ, 1, body)
			if err != nil {
				panic(err)
			}
			sizes = append(sizes, len(b))
		}
	}
	return sizes
}

// A dedicated lane's batch whose replies together pass the lane's maximum
// answers the calls that fit and refuses the others with an exception;
// no call waits for its timeout.
func TestLaneBatchReplyBounded(t *testing.T) {
	ts := laneServer(t, server.WithLimits(replyLimits))
	c := dial(t, ts.addr)
	m := methodWith(hints.Set{Protocol: hints.ProtoRFP, Batch: 4, BatchTimeout: 50 * time.Millisecond})
	// Each reply is 600 KiB: one fits the 1 MiB limit, two do not.
	msg := strings.Repeat("b", 600)
	const callers, calls = 4, 6
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		ok, refused int
		unexpected  []error
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				var res wiretest.EchoResult
				err := c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: msg, Mode: wiretest.ModeRepeat}, &res)
				mu.Lock()
				var ae *proto.ApplicationException
				switch {
				case err == nil && res.Success != nil && *res.Success == strings.Repeat(msg, wiretest.RepeatTimes):
					ok++
				case errors.As(err, &ae) && strings.Contains(ae.Message, "does not fit in the batch's reply"):
					refused++
				default:
					unexpected = append(unexpected, fmt.Errorf("call: %v", err))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, unexpected)
	require.Equal(t, callers*calls, ok+refused)
	_, sizes := c.BatchSizes("Echo:echo")
	multi := 0
	for _, s := range sizes {
		if s > 1 {
			multi += s - 1
		}
	}
	t.Logf("batches %v: %d answered, %d refused", sizes, ok, refused)
	// The first reply of each batch fits; each further one does not.
	require.Equal(t, multi, refused, "batches %v", sizes)
	require.Equal(t, len(sizes), ok, "batches %v", sizes)
}

// The same for plain Thrift clients (buffered, framed) and THeader: an
// Apache client gets the exception in place of the oversized reply.
func TestReplyOverLimitRefusedPlain(t *testing.T) {
	ts := serve(t, "", server.WithLimits(replyLimits))
	conf := &thrift.TConfiguration{ConnectTimeout: testenv.HangGuard(5 * time.Second), SocketTimeout: testenv.HangGuard(10 * time.Second)}
	plain := func(framed bool) func() (thrift.TClient, func(), error) {
		return func() (thrift.TClient, func(), error) {
			sock := thrift.NewTSocketConf(ts.addr, conf)
			if err := sock.Open(); err != nil {
				return nil, nil, err
			}
			var tr thrift.TTransport = thrift.NewTBufferedTransport(sock, 4096)
			if framed {
				tr = thrift.NewTFramedTransportConf(sock, conf)
			}
			p := thrift.NewTBinaryProtocolConf(tr, conf)
			return thrift.NewTStandardClient(p, p), func() { sock.Close() }, nil
		}
	}
	cases := []struct {
		name string
		dial func() (thrift.TClient, func(), error)
	}{
		{"buffered", plain(false)},
		{"framed", plain(true)},
		{"theader", func() (thrift.TClient, func(), error) {
			ac, err := wiretest.DialApacheTHeader(ts.addr, thrift.THeaderProtocolCompact, false)
			if err != nil {
				return nil, nil, err
			}
			return ac.Client, func() { ac.Close() }, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, closeFn, err := tc.dial()
			require.NoError(t, err)
			defer closeFn()
			var res wiretest.ApacheEchoResult
			_, err = cl.Call(tctx(t), "echo", &wiretest.ApacheEchoArgs{Msg: strings.Repeat("y", 2000), Mode: wiretest.ModeRepeat}, &res)
			var ae thrift.TApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, int32(thrift.INTERNAL_ERROR), ae.TypeId())
			require.Regexp(t, fmt.Sprintf(`^hatrpc: reply of 20480[0-9]{2} bytes exceeds the message limit of %d bytes$`, replyLimit), ae.Error())
			res = wiretest.ApacheEchoResult{}
			_, err = cl.Call(tctx(t), "echo", &wiretest.ApacheEchoArgs{Msg: "small"}, &res)
			require.NoError(t, err)
			require.NotNil(t, res.Success)
			require.Equal(t, "small", *res.Success)
		})
	}
}
