package server_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// growChunk is what growServer's handler builds between reservations.
const growChunk = 64 << 10

// growServer serves method "grow": its reply is the number of bytes its
// argument asks for (Msg, in decimal), built growChunk at a time, each
// chunk reserved first (server.ReserveReply); where a reservation is
// refused the reply is cut to what was built. With Msg "!N" the whole
// reply is reserved first, and a refusal is the call's error. built counts the bytes
// every handler built.
func growServer(t *testing.T, built *atomic.Int64, opts ...server.Option) (*server.Server, string) {
	t.Helper()
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	s.Register(growService(built))
	return s, serveOn(t, s)
}

// growService is growServer's service.
func growService(built *atomic.Int64) *server.Service {
	return &server.Service{Name: "Grow", Methods: []server.Method{{
		Name: "grow", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
		Handle: func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
			msg := a.(*wiretest.EchoArgs).Msg
			whole := strings.HasPrefix(msg, "!") // reserved at once, refused whole
			want, err := strconv.Atoi(strings.TrimPrefix(msg, "!"))
			if err != nil {
				return nil, err
			}
			if whole {
				if err := server.ReserveReply(ctx, want+64); err != nil {
					return nil, err
				}
			}
			var b []byte
			for len(b) < want {
				n := min(growChunk, want-len(b))
				if err := server.ReserveReply(ctx, len(b)+n+64); err != nil {
					if len(b) == 0 {
						return nil, err
					}
					break
				}
				b = append(b, make([]byte, n)...)
				built.Add(int64(n))
			}
			s := string(b)
			return &wiretest.EchoResult{Success: &s}, nil
		},
	}}}
}

// msgLimit is the default limits with the message limit n.
func msgLimit(n int) proto.Limits {
	l := proto.DefaultLimits
	l.MaxMessageSize = n
	return l
}

func growCall(t *testing.T, size int) []byte {
	return message(t, proto.Binary, "grow", proto.Call, 1, &wiretest.EchoArgs{Msg: strconv.Itoa(size)})
}

// A method's first reply teaches the server a small estimate; then
// replies 20 times larger are asked for by 8 Thrift-over-HTTP clients
// that read nothing. Each handler reserves as it builds, so what all of
// them built and hold unsent stays within the budget (before
// ReserveReply, each call reserved the small estimate and every handler
// built its 3 MiB: 24 MiB against a 4 MiB budget); the replies are cut,
// none refused, and all are answered once read (the calls that waited
// for memory meanwhile then run).
func TestRepliesOverEstimateBounded(t *testing.T) {
	const size, total, clients = 3 << 20, 4 << 20, 8
	var built atomic.Int64
	s, _ := growServer(t, &built, server.WithMemoryBudget(total, total), server.WithWriteTimeout(time.Hour))
	h := s.HTTPHandler()

	// The estimate: one small reply.
	warm := httptest.NewRecorder()
	h.ServeHTTP(warm, httptest.NewRequestWithContext(tctx(t), http.MethodPost, "/", bytes.NewReader(growCall(t, 150<<10))))
	require.Equal(t, http.StatusOK, warm.Code)
	built.Store(0)

	release := make(chan struct{})
	var writing atomic.Int32
	ws := make([]*stuckWriter, clients)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = newStuckWriter(release, &writing)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.ServeHTTP(ws[i], httptest.NewRequestWithContext(tctx(t), http.MethodPost, "/", bytes.NewReader(growCall(t, size))))
		}()
	}
	// Answers wait in Write, unread, and calls behind them wait for
	// memory; what the handlers built and hold is never more than the
	// budget.
	require.Eventually(t, func() bool {
		return writing.Load() >= 1
	}, eventually, time.Millisecond, "unread responses held")
	for range 200 {
		require.LessOrEqual(t, built.Load(), int64(total), "replies built beyond the budget")
		require.LessOrEqual(t, server.BudgetUsed(s), int64(total))
		time.Sleep(time.Millisecond)
	}

	close(release)
	waitGroup(t, &wg)
	var got int64
	for i, w := range ws {
		require.Equal(t, http.StatusOK, w.code, "client %d", i)
		var res wiretest.EchoResult
		decodeReply(t, w.body.Bytes(), &res)
		require.LessOrEqual(t, len(*res.Success), size, "client %d", i)
		got += int64(len(*res.Success))
	}
	assert.Equal(t, built.Load(), got, "each reply is what its handler built")
	require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, eventually, time.Millisecond)
}

// ReserveReply's answers, on a HatRPC connection: a reply within the
// share is built whole; one whose result and encoding outgrow the share
// is cut at the last chunk that fit; without a budget only the message
// limit counts, and a reply reserved whole over it is refused before it
// is built, the call getting an exception saying so.
func TestReserveReply(t *testing.T) {
	for _, tc := range reserveCases("message limit") {
		t.Run(tc.name, func(t *testing.T) {
			var built atomic.Int64
			s, addr := growServer(t, &built, tc.opts...)
			c, err := client.Dial(tctx(t), addr)
			require.NoError(t, err)
			defer func() { require.NoError(t, c.Close()) }()
			var res wiretest.EchoResult
			err = c.Call(tctx(t), &client.Method{Service: "Grow", Name: "grow"}, &wiretest.EchoArgs{Msg: tc.size}, &res)
			if tc.wantErr != "" {
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae)
				assert.Equal(t, tc.wantErr, ae.Message)
				assert.Zero(t, built.Load(), "refused before it was built")
				return
			}
			require.NoError(t, err)
			assert.Len(t, *res.Success, tc.wantLen)
			require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, eventually, time.Millisecond)
		})
	}
}

// ReserveReply's errors.
func TestReserveReplyErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *server.ReplyRoomError
		want string
	}{
		{"message limit", &server.ReplyRoomError{Size: 3 << 20, Limit: 2 << 20, MessageLimit: true},
			"hatrpc: reply of 3145728 bytes exceeds the message limit of 2097152 bytes"},
		{"share", &server.ReplyRoomError{Size: 3 << 20, Limit: 1 << 19},
			"hatrpc: no room for a reply of 3145728 bytes: 524288 bytes of the connection's memory share are free (WithMemoryBudget)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.EqualError(t, tc.err, tc.want)
			assert.True(t, errors.Is(tc.err, server.ErrReplyRoom))
		})
	}
	// Not a call's context: nothing to reserve.
	require.NoError(t, server.ReserveReply(context.Background(), 1<<40))
}

// reserveCase is a case of TestReserveReply and TestReserveReplyOnLane:
// a Grow call of size bytes (a leading '!' reserves the reply whole
// first) on a server with opts.
type reserveCase struct {
	name    string
	opts    []server.Option
	size    string
	wantLen int
	wantErr string
}

// reserveCases are those cases; limit names the reply limit that is not
// the share ("message limit" on TCP, "lane's maximum" on a lane: both
// the message limit, the lane's sized to it).
func reserveCases(limit string) []reserveCase {
	const share, max = 1 << 20, 1 << 20
	return []reserveCase{
		{"within the share", []server.Option{server.WithMemoryBudget(4*share, share)}, "102400", 100 << 10, ""},
		// A reply up to the share is reserved the whole share when the
		// connection holds nothing else; 960 KiB + 64 KiB + 64 passes it.
		{"cut at the share", []server.Option{server.WithMemoryBudget(4*share, share)}, strconv.Itoa(2 * share), share - growChunk, ""},
		{"cut at the " + limit, []server.Option{server.WithMemoryBudget(0, 0), server.WithLimits(msgLimit(max))},
			strconv.Itoa(2 * max), max - growChunk, ""},
		{"whole over the " + limit, []server.Option{server.WithMemoryBudget(0, 0), server.WithLimits(msgLimit(max))},
			"!" + strconv.Itoa(2*max), 0, "hatrpc: reply of 2097216 bytes exceeds the message limit of 1048576 bytes"},
		{"whole over the share", []server.Option{server.WithMemoryBudget(4*share, share)},
			"!" + strconv.Itoa(share), 0, "hatrpc: no room for a reply of 1048640 bytes: 524288 bytes of the connection's memory share are free (WithMemoryBudget)"},
	}
}

// ReplyRoom tells a handler the largest reply ReserveReply would grant
// now, without reserving it: ReserveReply of that much succeeds, one
// byte more is refused. Without a budget it is the message limit; with
// one, the connection's share when the connection holds nothing else.
// Outside a call there is no room to tell.
func TestReplyRoom(t *testing.T) {
	roomService := &server.Service{Name: "Room", Methods: []server.Method{{
		Name: "room", NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
		Handle: func(ctx context.Context, _ proto.Struct) (proto.Struct, error) {
			n, ok := server.ReplyRoom(ctx)
			over := server.ReserveReply(ctx, n+1) // refused: changes nothing
			at := server.ReserveReply(ctx, n)
			s := strconv.Itoa(n) + " " + strconv.FormatBool(ok) + " " +
				strconv.FormatBool(errors.Is(over, server.ErrReplyRoom)) + " " + strconv.FormatBool(at == nil)
			return &wiretest.EchoResult{Success: &s}, nil
		},
	}}}
	for _, tc := range []struct {
		name string
		opts []server.Option
		want int
	}{
		{"message limit", []server.Option{server.WithMemoryBudget(0, 0), server.WithLimits(msgLimit(1 << 20))}, 1 << 20},
		{"share", []server.Option{server.WithMemoryBudget(4<<20, 1<<20)}, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := server.New(append([]server.Option{server.WithLogger(quiet)}, tc.opts...)...)
			s.Register(roomService)
			c := dial(t, serveOn(t, s))
			var res wiretest.EchoResult
			require.NoError(t, c.Call(tctx(t), &client.Method{Service: "Room", Name: "room"}, new(wiretest.EchoArgs), &res))
			require.Equal(t, strconv.Itoa(tc.want)+" true true true", *res.Success)
			require.Eventually(t, func() bool { return server.BudgetUsed(s) == 0 }, eventually, time.Millisecond)
		})
	}
	n, ok := server.ReplyRoom(context.Background())
	require.False(t, ok)
	require.Zero(t, n)
}
