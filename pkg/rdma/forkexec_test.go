package rdma

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/fdcheck"
)

// TestForkExecWhileServing: a process serving calls on a connected pair
// (two devices: on shm, the peer's segment is mapped too) starts children
// through os/exec over and over, /bin/true and a child that lists and
// writes to every descriptor it was given (fdcheck); no child holds any
// descriptor of the engine (all are close-on-exec), and every call before,
// during and after the children is answered byte-exact. Provider-neutral:
// shm here, ibv on an RDMA host (HATRPC_PROVIDER=ibv).
func TestForkExecWhileServing(t *testing.T) {
	for _, proto := range []Protocol{ProtoEager, ProtoReadRNDV} {
		t.Run(proto.String(), func(t *testing.T) {
			before, err := fdcheck.Targets()
			require.NoError(t, err)
			cfg := testEPConfig(PollEvent)
			cli, srv := newRPCPair(t, cfg, cfg, true)
			rec := &recorder{}
			serve(t, srv, proto, rec.handle)
			// shm segments (memfd), wake pipes, eventfds and epoll, the fd
			// broker's socket; on ibv /dev/infiniband/uverbsN and the
			// completion channels.
			engine, err := fdcheck.Opened(before)
			require.NoError(t, err)
			require.NotEmpty(t, engine, "the engine holds descriptors while serving")

			call := func(i int) error {
				req := make([]byte, 1+(i*7919)%(48<<10))
				fill(req, byte(i))
				ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
				defer cancel()
				resp, err := cli.Call(ctx, proto, req)
				switch {
				case err != nil:
					return err
				case !bytes.Equal(resp, expectedResp(req, len(req))):
					return fmt.Errorf("call %d: response differs", i)
				case rec.sum(rec.count()-1) != sha256.Sum256(req):
					return fmt.Errorf("call %d: request arrived altered", i)
				}
				return nil
			}
			const children = 6
			cctx, cancel := context.WithTimeout(context.Background(), children*6*testTimeout)
			defer cancel()
			calls, err := fdcheck.WhileChildren(cctx, children, engine, call)
			require.NoError(t, err)
			require.Positive(t, calls)
			// And after the last child, as before.
			req := []byte("after the children")
			resp, err := cli.Call(cctx, proto, req)
			require.NoError(t, err)
			require.Equal(t, expectedResp(req, len(req)), resp)
			t.Logf("%s: %d calls verified while %d children ran; none of the engine's %d descriptors inherited: %v", proto, calls, 2*children, len(engine), engine)
		})
	}
}
