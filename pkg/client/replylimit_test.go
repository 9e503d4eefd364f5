//go:build cgo && linux

package client_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// replyLimit is the test server's message limit: small, so a reply can
// pass it while its request is tiny.
const replyLimit = 1 << 20

var replyLimits = proto.Limits{MaxMessageSize: replyLimit, MaxDepth: 16, MaxStringLength: 4 << 20, MaxContainerSize: 1 << 16}

// A reply over the server's message limit is refused before it is sent:
// the call gets an application exception naming the size and the limit,
// on every route, and the connection goes on.
func TestReplyOverLimitRefused(t *testing.T) {
	cases := []struct {
		name  string
		lanes bool
		set   hints.Set
	}{
		{"tcp", false, hints.Set{}},
		{"lane", true, hints.Set{}},
		{"lane-rfp", true, hints.Set{Protocol: hints.ProtoRFP}},
		{"flock", true, hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := []server.Option{server.WithLimits(replyLimits)}
			var ts *testServer
			if tc.lanes {
				ts = laneServer(t, opts...)
			} else {
				ts = serve(t, "", opts...)
			}
			c := dial(t, ts.addr)
			m := methodWith(tc.set)
			// 2,000 bytes repeated 1,024 times: a 2,048,000-byte string.
			args := &wiretest.EchoArgs{Msg: strings.Repeat("y", 2000), Mode: wiretest.ModeRepeat}
			var res wiretest.EchoResult
			err := c.Call(tctx(t), m, args, &res)
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, proto.ExcInternalError, ae.Type)
			require.Regexp(t, fmt.Sprintf(`^hatrpc: reply of 20480[0-9]{2} bytes exceeds the message limit of %d bytes$`, replyLimit), ae.Message)
			// The connection goes on: a reply within the limit arrives.
			args.Msg = strings.Repeat("z", 100)
			require.NoError(t, c.Call(tctx(t), m, args, &res))
			require.Equal(t, strings.Repeat(args.Msg, wiretest.RepeatTimes), *res.Success)
			require.Equal(t, 1.0, serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "reply_too_large"}))
		})
	}
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
