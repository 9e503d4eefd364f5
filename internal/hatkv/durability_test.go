package hatkv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// The durability test re-executes the test binary as a HatKV server
// process selected by these variables, so it can kill it with SIGKILL.
const (
	childDirEnv    = "HATKV_TEST_SERVER_DIR"
	childCommitEnv = "HATKV_TEST_SERVER_COMMIT"
	childAddrTag   = "HATKV-LISTENING "
)

// runServerChild serves the store in $HATKV_TEST_SERVER_DIR with the IDL's
// configuration (kv.sync=always) and prints its address; it runs until
// killed.
func runServerChild() int {
	ctx := context.Background()
	opts := []Option{WithLogger(quietLogger())}
	if c := os.Getenv(childCommitEnv); c != "" {
		opts = append(opts, WithSetting("commit", c))
	}
	srv, err := Open(ctx, os.Getenv(childDirEnv), opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	if srv.Config().Sync.String() != "always" {
		fmt.Fprintln(os.Stderr, "the IDL no longer says kv.sync=always")
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 2
	}
	exitWithParent()
	fmt.Printf("%s%s\n", childAddrTag, ln.Addr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	go func() {
		<-stop
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 2
	}
	return 0
}

// exitWithParent ends a re-executed child when the test process that holds
// its stdin dies (e.g. on a test timeout), so no server outlives the test.
func exitWithParent() {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
}

type child struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{} // closed once stdout hit EOF
}

// wait reaps the process after its output is drained, as exec requires.
func (c *child) wait() error {
	<-c.exited
	return c.cmd.Wait()
}

func startChild(t *testing.T, dir, commit string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childCommitEnv+"="+commit)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe() // held open for the child's lifetime
	require.NoError(t, err)
	t.Cleanup(func() { _ = stdin.Close() })
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	// Never leave a server process behind, whatever the test did.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		defer close(exited)
		defer close(addr)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), childAddrTag); ok {
				addr <- a
			}
		}
	}()
	select {
	case a, ok := <-addr:
		require.True(t, ok, "server child exited before listening")
		return &child{cmd: cmd, addr: a, exited: exited}
	case <-time.After(testenv.HangGuard(30 * time.Second)):
		t.Fatal("server child did not start in time")
		return nil
	}
}

func durableRecord(key string) hatkv.Record {
	return hatkv.Record{"key": []byte(key), "pad": []byte(strings.Repeat(key, 10))}
}

// TestDurabilityKill9: with kv.sync=always every write the server
// acknowledged is present after the server process is killed with SIGKILL
// and restarted, for both commit modes.
func TestDurabilityKill9(t *testing.T) {
	for _, commit := range []string{"group", "immediate"} {
		t.Run(commit, func(t *testing.T) {
			dir := t.TempDir()
			ch := startChild(t, dir, commit)
			ctx := testCtx(t, 60*time.Second)
			c, err := Dial(ctx, ch.addr, WithConns(4))
			require.NoError(t, err)

			var mu sync.Mutex
			var acked []string
			var wg sync.WaitGroup
			writeCtx, stopWriters := context.WithCancel(ctx)
			defer stopWriters()
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					kv := c.KV()
					for i := 0; writeCtx.Err() == nil; i++ {
						key := fmt.Sprintf("w%d-%07d", w, i)
						var err error
						keys := []string{key}
						if i%4 == 3 {
							keys = append(keys, key+"-m")
							err = kv.MultiPut(writeCtx, []*hatkv.KeyRecord{
								{Key: key, Record: durableRecord(key)}, {Key: key + "-m", Record: durableRecord(key + "-m")}})
						} else {
							err = kv.Put(writeCtx, key, durableRecord(key))
						}
						if err != nil {
							return // the server is gone
						}
						mu.Lock()
						acked = append(acked, keys...)
						mu.Unlock()
					}
				}()
			}
			deadline := time.Now().Add(testenv.HangGuard(20 * time.Second))
			for {
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n >= 2000 || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			require.NoError(t, ch.cmd.Process.Signal(syscall.SIGKILL))
			err = ch.wait()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "the server died of SIGKILL: %v", err)
			stopWriters()
			wg.Wait()
			require.NoError(t, c.Close())

			mu.Lock()
			keys := append([]string(nil), acked...)
			mu.Unlock()
			require.NotEmpty(t, keys)

			ch2 := startChild(t, dir, commit)
			c2, err := Dial(ctx, ch2.addr)
			require.NoError(t, err)
			defer c2.Close()
			kv := c2.KV()
			lost := 0
			for start := 0; start < len(keys); start += 100 {
				batch := keys[start:min(start+100, len(keys))]
				res, err := kv.MultiGet(ctx, batch, nil)
				require.NoError(t, err)
				for i, l := range res {
					if !l.Found || string(l.Record["key"]) != batch[i] || string(l.Record["pad"]) != strings.Repeat(batch[i], 10) {
						lost++
					}
				}
			}
			assert.Zero(t, lost, "acknowledged writes lost after kill -9 (of %d)", len(keys))
			t.Logf("commit=%s: %d acknowledged writes survived SIGKILL", commit, len(keys))
		})
	}
}
