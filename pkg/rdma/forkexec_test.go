package rdma

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"sync"
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

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var calls int
			var callErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					req := make([]byte, 1+(i*7919)%(48<<10))
					fill(req, byte(i))
					ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
					resp, err := cli.Call(ctx, proto, req)
					cancel()
					if err == nil && !bytes.Equal(resp, expectedResp(req, len(req))) {
						err = fmt.Errorf("call %d: response differs", i)
					}
					if err == nil && rec.sum(rec.count()-1) != sha256.Sum256(req) {
						err = fmt.Errorf("call %d: request arrived altered", i)
					}
					if err != nil {
						callErr = err
						return
					}
					calls++
				}
			}()

			self, err := os.Executable()
			require.NoError(t, err)
			const children = 6
			for i := 0; i < children; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 6*testTimeout)
				require.NoError(t, exec.CommandContext(ctx, "/bin/true").Run())
				cmd := exec.CommandContext(ctx, self, "-test.run=^$")
				cmd.Env = append(os.Environ(), fdcheck.Env+"=1")
				out, err := cmd.Output()
				cancel()
				require.NoError(t, err)
				leaks, err := fdcheck.Leaks(string(out), engine)
				require.NoError(t, err)
				require.Empty(t, leaks, "child %d holds engine descriptors", i)
			}
			close(stop)
			wg.Wait()
			require.NoError(t, callErr)
			require.Positive(t, calls)
			// And after the last child, as before.
			req := []byte("after the children")
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			resp, err := cli.Call(ctx, proto, req)
			require.NoError(t, err)
			require.Equal(t, expectedResp(req, len(req)), resp)
			t.Logf("%s: %d calls verified while %d children ran; none of the engine's %d descriptors inherited: %v", proto, calls, 2*children, len(engine), engine)
		})
	}
}
