package fdcheck

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(Env) != "" {
		os.Exit(ChildMain())
	}
	goleak.VerifyTestMain(m)
}

func TestLeaks(t *testing.T) {
	engine := []string{"pipe:[42]", "/memfd:hatrpc-shm (deleted)"}
	cases := []struct {
		name, report string
		leaks        []string
		err          string
	}{
		{"nothing", "done\n", nil, ""},
		{"not the engine's", "fd 3 /sys/fs/cgroup/cpu.max refused: bad file descriptor\nfd 9 pipe:[7] written\ndone\n", nil, ""},
		{"an engine pipe", "fd 9 pipe:[42] written\ndone\n", []string{"fd 9 pipe:[42] written"}, ""},
		{"any eventfd", "fd 4 anon_inode:[eventfd] written\ndone", []string{"fd 4 anon_inode:[eventfd] written"}, ""},
		{"a uverbs file", "fd 5 /dev/infiniband/uverbs1 written\ndone", []string{"fd 5 /dev/infiniband/uverbs1 written"}, ""},
		{"cut short", "fd 3 x written\n", nil, `fdcheck: the child's report is cut short: "fd 3 x written\n"`},
		{"bad line", "fd 3\ndone", nil, `fdcheck: bad report line "fd 3"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			leaks, err := Leaks(c.report, engine)
			if c.err != "" {
				require.EqualError(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.leaks, leaks)
		})
	}
}

// TestChildSeesInherited: a descriptor passed on purpose (ExtraFiles) is
// reported, written to, and found by Opened and Leaks.
func TestChildSeesInherited(t *testing.T) {
	before, err := Targets()
	require.NoError(t, err)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	opened, err := Opened(before)
	require.NoError(t, err)
	require.Len(t, opened, 1)
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), Env+"=1")
	cmd.ExtraFiles = []*os.File{w}
	out, err := cmd.Output()
	require.NoError(t, err)
	leaks, err := Leaks(string(out), opened)
	require.NoError(t, err)
	require.Equal(t, []string{"fd 3 " + opened[0] + " written"}, leaks)
	b := make([]byte, 1)
	_, err = r.Read(b)
	require.NoError(t, err)
	assert.Equal(t, byte(0xEE), b[0])
}

// TestWhileChildren: the calls run while the children do; a failing call
// is the error, with the count of those that succeeded before it.
func TestWhileChildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var seen atomic.Int64
	calls, err := WhileChildren(ctx, 2, nil, func(int) error {
		seen.Add(1)
		time.Sleep(time.Millisecond)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, seen.Load(), int64(calls))
	calls, err = WhileChildren(ctx, 1, nil, func(i int) error {
		if i == 3 {
			return errors.New("call 3 failed")
		}
		return nil
	})
	require.EqualError(t, err, "call 3 failed")
	assert.Equal(t, 2, calls)
}
