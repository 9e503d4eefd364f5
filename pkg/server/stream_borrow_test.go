package server_test

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// Borrowed stream messages (the borrow_msgs hint): a receiver's binary
// values alias the message's frame buffer until its next RecvMsg, and the
// buffer then goes back to the pool for a later frame.

// borrowSizes are the blob sizes of the mixed streams, message i having
// borrowSizes[i%len]: empty, small (copied by an owning decode), and
// large ones of three buffer classes, one past a lane reply's default
// buffer.
var borrowSizes = []int{0, 7, 100, 3000, 40 << 10, 64 << 10, 200 << 10}

// borrowMsgs is the messages of a mixed stream: 40 of each size, about
// 12 MiB, a dozen windows' worth. The buffers in flight do not grow with
// it (in one process, the client's and the server's, up to a window's
// each way: 37 measured at most), so a stream long enough shows them
// reused.
const borrowMsgs = 280

// mixedMsg is message i of a mixed stream: its blob holds byte(i+1) only.
func mixedMsg(i int) *wiretest.EchoArgs {
	b := make([]byte, borrowSizes[i%len(borrowSizes)])
	for k := range b {
		b[k] = byte(i + 1)
	}
	return &wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: b}
}

// checkMixed says how a received message i differs from mixedMsg(i).
func checkMixed(a *wiretest.EchoArgs, i int) error {
	if want := borrowSizes[i%len(borrowSizes)]; a.Msg != strconv.Itoa(i) || len(a.Blob) != want {
		return fmt.Errorf("message %d: got %q with %d bytes, want %d bytes", i, a.Msg, len(a.Blob), want)
	}
	for k, c := range a.Blob {
		if c != byte(i+1) {
			return fmt.Errorf("message %d: byte %d is %d, want %d", i, k, c, byte(i+1))
		}
	}
	return nil
}

// mixedRecv reads a mixed stream through recv until io.EOF: each message
// is checked when it comes and, borrowed or not, again just before the
// next RecvMsg (valid until then, whatever the reader filled meanwhile).
// Owned messages are all kept and checked again at the end. It returns
// the messages read and the distinct buffers the large ones lived in.
func mixedRecv(recv func(*wiretest.EchoArgs) error, owned bool) (n, buffers int, err error) {
	seen := map[*byte]bool{}
	var prev *wiretest.EchoArgs
	var kept []*wiretest.EchoArgs
	for ; ; n++ {
		if prev != nil {
			if err := checkMixed(prev, n-1); err != nil {
				return n, 0, fmt.Errorf("before the next RecvMsg: %w", err)
			}
		}
		a := new(wiretest.EchoArgs)
		if err := recv(a); err == io.EOF {
			break
		} else if err != nil {
			return n, 0, err
		}
		if err := checkMixed(a, n); err != nil {
			return n, 0, err
		}
		if len(a.Blob) >= wire.AliasMin {
			seen[unsafe.SliceData(a.Blob)] = true
		}
		prev = a
		if owned {
			kept = append(kept, a)
		}
	}
	for i, a := range kept {
		if err := checkMixed(a, i); err != nil {
			return n, 0, fmt.Errorf("kept to the end: %w", err)
		}
	}
	return n, len(seen), nil
}

// largeMixed is how many messages of a mixed stream of n are large
// (wire.AliasMin or more).
func largeMixed(n int) int {
	k := 0
	for i := range n {
		if borrowSizes[i%len(borrowSizes)] >= wire.AliasMin {
			k++
		}
	}
	return k
}

// borrowService is "B": "mixed", a server stream of Mode mixed messages,
// and "sink", a client stream whose handler reads mixed messages with
// borrow_msgs on its side (unless the server ignores it: WithOwnedArgs)
// and answers "<messages> <buffers>" or what went wrong.
func borrowService(owned bool) *server.Service {
	return &server.Service{Name: "B", Methods: []server.Method{
		{Name: "mixed", Stream: stream.Server, HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			if err := ss.RecvMsg(&a); err != nil {
				return nil, err
			}
			for i := range int(a.Mode) {
				if err := ss.SendMsg(mixedMsg(i)); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}},
		{Name: "sink", Stream: stream.Client, Hints: &hints.Function{Name: "sink", Server: hints.Set{BorrowMsgs: true}},
			HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
				n, bufs, err := mixedRecv(func(a *wiretest.EchoArgs) error { return ss.RecvMsg(a) }, owned)
				got := fmt.Sprintf("%d %d", n, bufs)
				if err != nil {
					got = err.Error()
				}
				return &wiretest.EchoResult{Success: &got}, nil
			}},
	}}
}

func borrowMethod(name string, mode stream.Mode, borrow bool) *client.Method {
	m := &client.Method{Service: "B", Name: name, Stream: mode}
	if borrow {
		m.Hints = &hints.Function{Name: name, Client: hints.Set{BorrowMsgs: true}}
	}
	return m
}

func startBorrow(t *testing.T, owned bool, opts ...server.Option) string {
	t.Helper()
	if owned {
		opts = append(opts, server.WithOwnedArgs())
	}
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	s.Register(borrowService(owned))
	return serveOn(t, s)
}

// testBorrowedMsgs runs both directions of mixed streams against a
// server started with opts, each borrowed and owned: borrowed values are
// right until the next RecvMsg and their large buffers are reused (at
// most half as many as large messages: borrowMsgs), owned ones stay right for good, each in a buffer of its own.
// check, if not nil, checks each Conn after its two streams. inPlace:
// the server stream's large borrowed messages are read where they
// arrived (a lane's reply, pkg/client TestServerStreamBorrowedInPlace),
// at offsets that follow the replies' batching, not in pooled buffers:
// how many places they took says nothing of reuse there.
func testBorrowedMsgs(t *testing.T, opts []server.Option, inPlace bool, check func(*testing.T, *client.Conn), copts ...client.Option) {
	large := largeMixed(borrowMsgs)
	tests := []struct {
		name   string
		borrow bool // the client's hint
		owned  bool // the receiver ignores the hint (WithOwnedMsgs, WithOwnedArgs)
		copts  []client.Option
	}{
		{"borrowed", true, false, nil},
		{"owned", false, true, nil},
		{"hint ignored", true, true, []client.Option{client.WithOwnedMsgs()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := startBorrow(t, tt.owned, opts...)
			c := dial(t, addr, append(append([]client.Option(nil), copts...), tt.copts...)...)
			t.Run("server stream", func(t *testing.T) {
				st, err := c.NewStream(tctx(t), borrowMethod("mixed", stream.Server, tt.borrow), &wiretest.EchoResult{})
				require.NoError(t, err)
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: borrowMsgs}))
				require.NoError(t, st.CloseSend())
				n, bufs, err := mixedRecv(func(a *wiretest.EchoArgs) error { return st.RecvMsg(a) }, tt.owned)
				require.NoError(t, err)
				require.Equal(t, borrowMsgs, n)
				switch {
				case tt.owned:
					require.Equal(t, large, bufs, "owned messages kept: a buffer each")
				case !inPlace:
					require.LessOrEqual(t, bufs, large/2, "borrowed buffers are reused")
				}
			})
			t.Run("client stream", func(t *testing.T) {
				var res wiretest.EchoResult
				st, err := c.NewStream(tctx(t), borrowMethod("sink", stream.Client, false), &res)
				require.NoError(t, err)
				for i := range borrowMsgs {
					require.NoError(t, st.SendMsg(mixedMsg(i)))
				}
				require.NoError(t, st.CloseSend())
				require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoResult{}))
				require.NotNil(t, res.Success)
				var n, bufs int
				_, err = fmt.Sscanf(*res.Success, "%d %d", &n, &bufs)
				require.NoError(t, err, "the handler: %s", *res.Success)
				require.Equal(t, borrowMsgs, n)
				if tt.owned {
					require.Equal(t, large, bufs, "owned messages kept: a buffer each")
				} else {
					require.LessOrEqual(t, bufs, large/2, "borrowed buffers are reused")
				}
			})
			if check != nil {
				check(t, c)
			}
		})
	}
}

func TestStreamBorrowedMsgs(t *testing.T) {
	testBorrowedMsgs(t, nil, false, nil, client.WithRDMA("off"))
}
