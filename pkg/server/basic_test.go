package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestEchoAllEncodings(t *testing.T) {
	_, _, addr := start(t)
	cases := []struct {
		name     string
		opts     []client.Option
		upgraded bool
	}{
		{"hatrpc-binary", nil, true},
		{"hatrpc-compact", []client.Option{client.WithCompact()}, true},
		{"hatrpc-framed-compact", []client.Option{client.WithCompact(), client.WithFramed()}, true},
		{"plain-unframed-binary", []client.Option{client.WithoutUpgrade()}, false},
		{"plain-framed-binary", []client.Option{client.WithoutUpgrade(), client.WithFramed()}, false},
		{"plain-unframed-compact", []client.Option{client.WithoutUpgrade(), client.WithCompact()}, false},
		{"plain-framed-compact", []client.Option{client.WithoutUpgrade(), client.WithFramed(), client.WithCompact()}, false},
		{"multiplexed", []client.Option{client.WithMultiplexed()}, true},
		{"multiplexed-plain", []client.Option{client.WithMultiplexed(), client.WithoutUpgrade()}, false},
		// TJSONProtocol stays plain Thrift.
		{"plain-unframed-json", []client.Option{client.WithProtocol(proto.JSON)}, false},
		{"plain-framed-json", []client.Option{client.WithProtocol(proto.JSON), client.WithFramed()}, false},
		{"multiplexed-json", []client.Option{client.WithProtocol(proto.JSON), client.WithMultiplexed()}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr, tc.opts...)
			require.Equal(t, tc.upgraded, c.Upgraded())
			for i := range 3 {
				msg := fmt.Sprintf("%s-%d", tc.name, i)
				got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: msg, Blob: []byte("!")})
				require.NoError(t, err)
				require.Equal(t, msg+"!", got)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	_, _, addr := start(t)
	for _, up := range []bool{true, false} {
		opts := []client.Option{}
		if !up {
			opts = append(opts, client.WithoutUpgrade())
		}
		c := dial(t, addr, opts...)
		cases := []struct {
			name  string
			mode  int32
			check func(t *testing.T, err error)
		}{
			{"panic", wiretest.ModePanic, func(t *testing.T, err error) {
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae)
				require.Equal(t, proto.ExcInternalError, ae.Type)
				require.Contains(t, ae.Message, "test panic")
			}},
			{"declared", wiretest.ModeDeclared, func(t *testing.T, err error) {
				var ee *wiretest.EchoError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, int32(42), ee.Code)
				require.Equal(t, "declared", ee.Why)
			}},
			{"plain", wiretest.ModePlain, func(t *testing.T, err error) {
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae)
				require.Equal(t, proto.ExcInternalError, ae.Type)
				require.Equal(t, "plain failure: plain", ae.Message)
			}},
			{"appexc", wiretest.ModeAppExc, func(t *testing.T, err error) {
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae)
				require.Equal(t, proto.ExcUnknown, ae.Type)
				require.Equal(t, "custom: appexc", ae.Message)
			}},
			{"noresult", wiretest.ModeNoResult, func(t *testing.T, err error) {
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae)
				require.Equal(t, proto.ExcMissingResult, ae.Type)
			}},
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s-upgraded=%v", tc.name, up), func(t *testing.T) {
				_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: tc.name, Mode: tc.mode})
				require.Error(t, err)
				tc.check(t, err)
				// The connection and server survive every failure mode.
				got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "after"})
				require.NoError(t, err)
				require.Equal(t, "after", got)
			})
		}
		t.Run(fmt.Sprintf("unknown-method-upgraded=%v", up), func(t *testing.T) {
			err := c.Call(tctx(t), &client.Method{Service: "Echo", Name: "nope"}, &wiretest.EchoArgs{Msg: "x"}, &wiretest.EchoResult{})
			require.ErrorIs(t, err, &proto.ApplicationException{Type: proto.ExcUnknownMethod})
			got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "after"})
			require.NoError(t, err)
			require.Equal(t, "after", got)
		})
	}
}

func TestServerHintTimeout(t *testing.T) {
	e := wiretest.NewEcho()
	svc := e.ServiceNamed("Hinted")
	// From the service table, as generated code fills Service.Hints.
	svc.Hints = &hints.Service{Name: "Hinted", Functions: []hints.Function{
		{Name: "echo", Server: hints.Set{Timeout: 50 * time.Millisecond}}}}
	s, _, addr := start(t)
	s.Register(svc)
	for _, opts := range [][]client.Option{{client.WithMultiplexed()}, {client.WithMultiplexed(), client.WithoutUpgrade()}} {
		c := dial(t, addr, opts...)
		ctx := tctx(t)
		err := c.Call(ctx, &client.Method{Service: "Hinted", Name: "echo"},
			&wiretest.EchoArgs{Msg: "h", Mode: wiretest.ModeWaitCtx}, &wiretest.EchoResult{})
		require.ErrorIs(t, err, &proto.ApplicationException{Type: proto.ExcInternalError, Message: "context deadline exceeded"})
		// The hint's 50 ms ended the call, not the caller's deadline (a
		// hang guard): no bet on how fast a host gets there.
		require.NoError(t, ctx.Err(), "the call ran to the caller's deadline")
		require.Equal(t, "h", <-e.Cancelled)
	}
}

func TestLargeMessages(t *testing.T) {
	_, _, addr := start(t)
	blob := make([]byte, 3<<20)
	for i := range blob {
		blob[i] = byte(i * 7)
	}
	for _, opts := range [][]client.Option{nil, {client.WithCompact()}, {client.WithoutUpgrade()}, {client.WithoutUpgrade(), client.WithFramed()}} {
		c := dial(t, addr, opts...)
		for _, n := range []int{0, 1, 4095, 64 << 10, 3 << 20} {
			got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "L", Blob: blob[:n]})
			require.NoError(t, err)
			require.Equal(t, "L"+string(blob[:n]), got)
		}
	}
}

func TestServerWithoutUpgrade(t *testing.T) {
	_, _, addr := start(t, server.WithoutUpgrade())
	c := dial(t, addr)
	require.False(t, c.Upgraded(), "server without upgrade grants no framing")
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "plain"})
	require.NoError(t, err)
	require.Equal(t, "plain", got)
}
