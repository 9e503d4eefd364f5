package kvstore

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The durability test re-executes the test binary as a writer child
// selected by these environment variables.
const (
	childEnv       = "HATKV_DURABILITY_CHILD"
	childDirEnv    = "HATKV_DURABILITY_DIR"
	childCommitEnv = "HATKV_DURABILITY_COMMIT"
	childSyncEnv   = "HATKV_DURABILITY_SYNC"
)

func durableValue(key string) Record {
	return Record{"k": []byte(key), "pad": []byte(strings.Repeat(key, 8))}
}

// runDurabilityChild writes records forever from several goroutines and
// prints each key on stdout only after its Put returned nil. The parent
// kills it with SIGKILL at an arbitrary point.
func runDurabilityChild() int {
	mode, err := ParseCommitMode(os.Getenv(childCommitEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	syncMode, err := ParseSyncMode(os.Getenv(childSyncEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv(childDirEnv), WithSync(syncMode), WithCommit(mode), WithMapSize(256<<20))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("w%d-%08d", g, i)
				var err error
				if i%5 == 4 {
					err = s.MultiPut(ctx, []KV{{Key: key, Record: durableValue(key)}, {Key: key + "-m", Record: durableValue(key + "-m")}})
				} else {
					err = s.Put(ctx, key, durableValue(key))
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "write:", err)
					os.Exit(3)
				}
				line := key + "\n"
				if i%5 == 4 {
					line += key + "-m\n"
				}
				mu.Lock()
				_, err = os.Stdout.WriteString(line)
				mu.Unlock()
				if err != nil {
					os.Exit(4)
				}
			}
		}()
	}
	wg.Wait()
	return 0
}

// TestDurabilityAfterSIGKILL checks that an acknowledged write survives
// the writer process being killed. The sync=always cases are the
// durability promise; the others check doc.go's claim that a process
// crash (as opposed to an OS crash) loses nothing in any sync mode.
func TestDurabilityAfterSIGKILL(t *testing.T) {
	cases := []struct{ commit, sync string }{
		{"immediate", "always"},
		{"group", "always"},
		{"immediate", "nometasync"},
		{"group", "nosync"},
	}
	for _, tc := range cases {
		mode := tc.commit
		t.Run(tc.commit+"/"+tc.sync, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=1", childDirEnv+"="+dir, childCommitEnv+"="+mode, childSyncEnv+"="+tc.sync)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())

			acked := make([]string, 0, 1024)
			sc := bufio.NewScanner(out)
			killed := false
			deadline := time.Now().Add(10 * time.Second)
			for sc.Scan() {
				acked = append(acked, sc.Text())
				if !killed && (len(acked) >= 400 || time.Now().After(deadline)) {
					// Killed mid-stream after a random delay, so that it
					// lands anywhere in a commit; acks already in the pipe
					// still count.
					delay := time.Duration(rand.Int64N(int64(20 * time.Millisecond)))
					time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
					killed = true
				}
			}
			err = cmd.Wait()
			require.True(t, killed, "child exited before it was killed: %v\n%s", err, stderr.String())
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			ws, ok := ee.Sys().(syscall.WaitStatus)
			require.True(t, ok)
			require.Equal(t, syscall.SIGKILL, ws.Signal(), stderr.String())
			require.NotEmpty(t, acked)

			s, err := Open(ctx, dir, WithMapSize(256<<20))
			require.NoError(t, err)
			defer s.Close()
			missing := 0
			for _, key := range acked {
				got, err := s.Get(ctx, key)
				if !assert.NoError(t, err, "acknowledged key %s lost", key) {
					missing++
					continue
				}
				assert.Equal(t, durableValue(key), got, key)
			}
			require.Zero(t, missing)
			st, err := s.Stats(ctx)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, st.Records, uint64(len(acked)))
			t.Logf("%s/%s: %d acknowledged keys verified, %d records on disk", tc.commit, tc.sync, len(acked), st.Records)
		})
	}
}
