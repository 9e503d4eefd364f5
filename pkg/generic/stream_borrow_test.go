package generic_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testutil"
)

// blobsIDL declares a server and a client stream whose receivers borrow
// their messages (borrow_msgs): the runtime decodes them in place, in
// the frame's buffer or, on a lane, in the lane's reply.
const blobsIDL = `namespace go blobs

struct Req { 1: i32 n, 2: i32 size }
struct Blob { 1: i32 seq, 2: binary data }
struct Sum { 1: i64 msgs, 2: i64 bytes }

service Blobs {
  Blob pull(1: Req req) (streaming.mode = "server") [ c_hint: borrow_msgs = on; ],
  Sum push(1: Blob blob) (streaming.mode = "client") [ s_hint: borrow_msgs = on; ],
}
`

// blobOf is message seq of a blobs stream: size bytes of byte(seq+1).
func blobOf(seq, size int) map[string]any {
	return map[string]any{"seq": int32(seq), "data": bytes.Repeat([]byte{byte(seq + 1)}, size)}
}

// checkBlobs says how kept messages differ from blobOf's.
func checkBlobs(kept []map[string]any, size int) error {
	for i, m := range kept {
		if !assert.ObjectsAreEqual(blobOf(i, size), m) {
			return fmt.Errorf("message %d of %d changed", i, len(kept))
		}
	}
	return nil
}

// blobsHandler: pull sends req.n blobs of req.size bytes; push keeps
// every blob to the end, checks them all then, and answers their count
// and bytes.
func blobsHandler(_ context.Context, method string, st *generic.ServerStream) ([]byte, error) {
	switch method {
	case "pull":
		req, err := st.Recv()
		if err != nil {
			return nil, err
		}
		for i := range int(req["n"].(int32)) {
			if err := st.Send(blobOf(i, int(req["size"].(int32)))); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case "push":
		var kept []map[string]any
		var n int
		for {
			m, err := st.Recv()
			if err == io.EOF {
				if err := checkBlobs(kept, n/max(len(kept), 1)); err != nil {
					return nil, err
				}
				return fmt.Appendf(nil, `{"msgs":%d,"bytes":%d}`, len(kept), n), nil
			}
			if err != nil {
				return nil, err
			}
			kept = append(kept, m)
			n += len(m["data"].([]byte))
		}
	}
	return nil, fmt.Errorf("no stream %s", method)
}

// A generic stream's values are its own whatever borrow_msgs says: the
// messages a borrowing receiver kept past its next Recv, and to the end,
// are intact, over TCP and on lanes, small messages and large ones (read
// in place on a lane: wire.AliasMin and more).
func TestGenericStreamsBorrowedMsgs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blobs.thrift")
	require.NoError(t, os.WriteFile(path, []byte(blobsIDL), 0o600))
	d, err := generic.Load(path)
	require.NoError(t, err)
	svc, err := d.Service("Blobs")
	require.NoError(t, err)
	require.True(t, svc.Hints.Function("pull").Client.BorrowMsgs, "the IDL's c_hint")
	require.True(t, svc.Hints.Function("push").Server.BorrowMsgs, "the IDL's s_hint")
	const n = 40 // over two windows of 64 KiB messages
	for _, rdma := range []string{"", fastpathtest.Provider()} {
		for _, size := range []int{100, 64 << 10} {
			t.Run(fmt.Sprintf("rdma=%s/size=%d", rdma, size), func(t *testing.T) {
				srv := testutil.StartServer(t, []*server.Service{svc.Server(genericUnary, generic.WithStreamHandler(blobsHandler))}, server.WithRDMA(rdma))
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				conn, err := client.Dial(ctx, srv.Addr, client.WithRDMA(rdma), client.WithHints(svc.Hints))
				require.NoError(t, err)
				defer conn.Close()
				gc := generic.NewClient(svc, conn)

				st, err := gc.Stream(ctx, "pull")
				require.NoError(t, err)
				require.NoError(t, st.Send(map[string]any{"n": int32(n), "size": int32(size)}))
				require.NoError(t, st.CloseSend())
				var kept []map[string]any
				for {
					m, err := st.Recv()
					if err == io.EOF {
						break
					}
					require.NoError(t, err)
					require.NoError(t, checkBlobs(append(kept, m), size), "as received")
					kept = append(kept, m)
				}
				require.Len(t, kept, n)
				require.NoError(t, checkBlobs(kept, size), "kept to the end")

				st, err = gc.Stream(ctx, "push")
				require.NoError(t, err)
				for i := range n {
					require.NoError(t, st.Send(blobOf(i, size)))
				}
				sum, err := st.CloseAndRecvJSON()
				require.NoError(t, err)
				assert.JSONEq(t, fmt.Sprintf(`{"msgs":%d,"bytes":%d}`, n, n*size), string(sum))

				lane, tcp := conn.StreamRoutes()
				if rdma == "" {
					assert.Zero(t, lane)
				} else {
					assert.Equal(t, uint64(2), lane, "both streams on lanes")
				}
				assert.Zero(t, tcp)
			})
		}
	}
}
