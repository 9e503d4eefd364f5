package rdma

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// envFDChild makes the test binary the child of TestForkExecWhileServing:
// it reports every descriptor it holds beyond stdin/out/err.
const envFDChild = "HATRPC_RDMA_TEST_FDCHILD"

// fdChildMain lists /proc/self/fd without opening anything (readlink of
// each slot), and writes a byte to each descriptor it finds, as a child
// that goes for what it inherited would: "fd N TARGET written|refused".
func fdChildMain() int {
	w := bufio.NewWriter(os.Stdout)
	for fd := 3; fd < 4096; fd++ {
		target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil {
			continue
		}
		verdict := "written"
		if _, err := syscall.Write(fd, []byte{0xEE}); err != nil {
			verdict = "refused: " + err.Error()
		}
		fmt.Fprintf(w, "fd %d %s %s\n", fd, target, verdict)
	}
	fmt.Fprintln(w, "done")
	if w.Flush() != nil {
		return 1
	}
	return 0
}

// fdTargets is what each open descriptor of this process names
// (readlink of /proc/self/fd/N: a path, "pipe:[INODE]", "anon_inode:[eventfd]").
func fdTargets(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	out := map[string]bool{}
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			out[target] = true
		}
	}
	return out
}

// TestForkExecWhileServing: a process serving calls on a connected pair
// (two devices: on shm, the peer's segment is mapped too) starts children
// through os/exec over and over, /bin/true and a child that lists and
// writes to every descriptor it was given; no child holds any descriptor
// of the engine (all are close-on-exec), and every call before, during and
// after the children is answered byte-exact. Provider-neutral: shm here,
// ibv on an RDMA host (HATRPC_PROVIDER=ibv).
func TestForkExecWhileServing(t *testing.T) {
	for _, proto := range []Protocol{ProtoEager, ProtoReadRNDV} {
		t.Run(proto.String(), func(t *testing.T) {
			before := fdTargets(t)
			cfg := testEPConfig(PollEvent)
			cli, srv := newRPCPair(t, cfg, cfg, true)
			rec := &recorder{}
			serve(t, srv, proto, rec.handle)
			// The engine's descriptors: shm segments (memfd), wake pipes,
			// eventfds and epoll, the fd broker's socket; on ibv
			// /dev/infiniband/uverbsN and the completion channels.
			var engine []string
			for target := range fdTargets(t) {
				if !before[target] && !strings.HasPrefix(target, "/proc/") && target != "anon_inode:[pidfd]" {
					engine = append(engine, target)
				}
			}
			require.NotEmpty(t, engine, "the engine holds descriptors while serving")
			// eventfds and epolls are named alike in every process (Go's
			// netpoll has them too): the child, which makes none, may
			// hold none at all, nor any RDMA or engine file.
			forbidden := func(target string) bool {
				return slices.Contains(engine, target) || strings.HasPrefix(target, "/dev/infiniband/") ||
					strings.HasPrefix(target, "/memfd:hatrpc") || slices.Contains([]string{
					"anon_inode:[eventfd]", "anon_inode:[eventpoll]", "anon_inode:[infinibandevent]"}, target)
			}

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
				cmd.Env = append(os.Environ(), envFDChild+"=1")
				out, err := cmd.Output()
				cancel()
				require.NoError(t, err)
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				require.Equal(t, "done", lines[len(lines)-1])
				// What the child holds of its own (the Go runtime's cgroup
				// files, say) or from whoever started the test is no
				// concern here; none of it may be the engine's.
				for _, l := range lines[:len(lines)-1] {
					f := strings.Fields(l)
					require.GreaterOrEqual(t, len(f), 3, l)
					require.False(t, forbidden(f[2]), "child %d holds an engine descriptor: %s", i, l)
				}
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
