package generic_test

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// A generic stream's message past the message limit is refused as any
// stream's (SendMsg): before it is built, with a *stream.TooLargeError,
// from the generic client and from the generic server's handler, and the
// stream goes on. 12 MiB of chat text (within the IDL's string limit)
// against a 1 MiB message limit costs about the limit.
func TestGenericStreamMessageLimit(t *testing.T) {
	const limit, boundFactor = 1 << 20, 8
	big := strings.Repeat("b", 12<<20)
	lim := proto.DefaultLimits
	lim.MaxMessageSize = limit
	svc := loadLogs(t)
	refused := make(chan error, 1)
	chat := func(_ context.Context, method string, st *generic.ServerStream) ([]byte, error) {
		for {
			m, err := st.Recv()
			if err == io.EOF {
				return nil, nil
			} else if err != nil {
				return nil, err
			}
			if m["text"] == "big" {
				refused <- st.Send(map[string]any{"author": "server", "text": big})
				continue
			}
			if err := st.Send(map[string]any{"author": "server", "text": "heard " + m["text"].(string)}); err != nil {
				return nil, err
			}
		}
	}
	srv := testutil.StartServer(t, []*server.Service{svc.Server(genericUnary, generic.WithStreamHandler(chat))}, server.WithLimits(lim))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(time.Minute))
	defer cancel()
	conn, err := client.Dial(ctx, srv.Addr, client.WithLimits(lim))
	require.NoError(t, err)
	defer conn.Close()
	st, err := generic.NewClient(svc, conn).Stream(ctx, "chat")
	require.NoError(t, err)
	say := func(text string) {
		t.Helper()
		require.NoError(t, st.Send(map[string]any{"author": "client", "text": text}))
		m, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, "heard "+text, m["text"])
	}
	say("hello") // warm the stream up

	for _, sender := range []string{"client", "server"} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if sender == "client" {
			err = st.Send(map[string]any{"author": "client", "text": big})
		} else {
			require.NoError(t, st.Send(map[string]any{"author": "client", "text": "big"}))
			select {
			case err = <-refused:
			case <-ctx.Done():
				t.Fatal("the handler's Send did not return")
			}
		}
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: a message of 12 MiB, limit %d: %d bytes allocated", sender, limit, alloc)
		require.Less(t, alloc, uint64(boundFactor*limit), sender)
		var tl *stream.TooLargeError
		require.ErrorAs(t, err, &tl, sender)
		require.Greater(t, tl.Size, len(big), sender)
		require.Equal(t, limit, tl.Limit, sender)
		say("still here, " + sender)
	}
	require.NoError(t, st.CloseSend())
	_, err = st.Recv()
	require.Equal(t, io.EOF, err)
}
