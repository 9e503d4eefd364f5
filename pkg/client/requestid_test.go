package client_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// Over HatRPC TCP a call whose one header is a 16-byte request id (what a
// Conn sends by default) is kept by the server as the id's bytes, not as
// a header block (wire.RequestIDOnly): its handler still reads exactly
// that header, answers with reply headers the caller captures, fails
// with a status the caller gets, and the server's log names the id, as
// for a call whose headers take the general way.
func TestTCPRequestIDHeaders(t *testing.T) {
	type seenCall struct {
		md      metadata.MD
		rid     string
		replied bool
	}
	seen := make(chan seenCall, 8)
	ic := func(ctx context.Context, _ *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		seen <- seenCall{maps.Clone(md), metadata.RequestID(ctx), metadata.SetReply(ctx, "r", "1")}
		switch args.(*wiretest.EchoArgs).Msg {
		case "fail":
			return nil, errors.New("disk on fire")
		case "status":
			return nil, status.Error(codes.NotFound, "no user u1")
		}
		return next(ctx, args)
	}
	logs := new(syncBuf)
	ts := serve(t, "", server.WithInterceptors(ic), server.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	c := dial(t, ts.addr)
	m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo"}}
	cases := []struct {
		name string
		out  []string // outgoing headers; none: the generated id alone
		rid  string   // the id the handler reads; "": a generated one
		n    int      // headers the handler reads
	}{
		{"generated id", nil, "", 1},
		{"own 16-byte id", []string{metadata.RequestIDKey, "0123456789abcdef"}, "0123456789abcdef", 1},
		{"own 16 bytes, not hex", []string{metadata.RequestIDKey, "ZZ-zz_ZZ zz.ZZ/z"}, "ZZ-zz_ZZ zz.ZZ/z", 1},
		{"own short id", []string{metadata.RequestIDKey, "req-1"}, "req-1", 1},
		{"generated id and a tenant", []string{"tenant", "t1"}, "", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tctx(t)
			if tc.out != nil {
				ctx = metadata.AppendToOutgoingContext(ctx, tc.out...)
			}
			var reply metadata.MD
			var res wiretest.EchoResult
			require.NoError(t, c.Call(metadata.CaptureReply(ctx, &reply), m, &wiretest.EchoArgs{Msg: "x"}, &res))
			require.Equal(t, "x", *res.Success)
			got := recv(t, seen)
			if tc.rid == "" {
				require.Regexp(t, "^[0-9a-f]{16}$", got.rid)
			} else {
				require.Equal(t, tc.rid, got.rid)
			}
			require.Equal(t, got.rid, got.md[metadata.RequestIDKey])
			require.Len(t, got.md, tc.n, "%v", got.md)
			if tc.n == 2 {
				require.Equal(t, "t1", got.md["tenant"])
			}
			require.True(t, got.replied, "the handler could set reply headers")
			require.Equal(t, metadata.MD{"r": "1"}, reply)

			err := c.Call(ctx, m, &wiretest.EchoArgs{Msg: "fail"}, &wiretest.EchoResult{})
			require.Equal(t, codes.Internal, status.Code(err))
			failed := recv(t, seen)
			require.Contains(t, logs.String(), `msg="hatrpc: handler error" method=echo`)
			require.Contains(t, logs.String(), "request_id="+quoteLog(failed.rid)+` err="disk on fire"`)

			reply = nil
			err = c.Call(metadata.CaptureReply(ctx, &reply), m, &wiretest.EchoArgs{Msg: "status"}, &wiretest.EchoResult{})
			require.Equal(t, codes.NotFound, status.Code(err))
			recv(t, seen)
			require.Equal(t, "1", reply["r"], "the handler's reply headers beside the status")
		})
	}
}

// quoteLog is s as slog's text handler writes a value.
func quoteLog(s string) string {
	var b strings.Builder
	only := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key != "v" {
			return slog.Attr{}
		}
		return a
	}
	slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: only})).Info("", "v", s)
	return strings.TrimSuffix(strings.TrimPrefix(b.String(), "v="), "\n")
}
