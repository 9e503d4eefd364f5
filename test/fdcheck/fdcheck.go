// Package fdcheck is what the fork/exec tests share: a child that reports
// the descriptors it was given (ChildMain, run by a test binary started
// with Env set), and the parent's view of which descriptors are the
// engine's (Targets before and after, Forbidden).
package fdcheck

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Env, set to anything, makes a test binary's TestMain run ChildMain.
const Env = "HATRPC_TEST_FDCHILD"

// ChildMain lists the descriptors this process inherited and writes a
// byte to each, as a child that goes for what it was given would:
// "fd N TARGET written|refused: ERR", then "done". Inherited ones are
// those without close-on-exec (an exec keeps only those, and leaves the
// flag off); the ones its own Go runtime and packages opened have it on,
// and are left out. /proc/self/fd is read with readlink alone, opening
// nothing. Its exit status is 0 when the list was written.
func ChildMain() int {
	w := bufio.NewWriter(os.Stdout)
	for fd := 3; fd < 4096; fd++ {
		target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil {
			continue
		}
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if errno != 0 || flags&syscall.FD_CLOEXEC != 0 {
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

// Targets is what each open descriptor of this process names (readlink of
// /proc/self/fd/N: a path, "pipe:[INODE]", "anon_inode:[eventfd]").
func Targets() (map[string]bool, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			out[target] = true
		}
	}
	return out, nil
}

// Opened is what the process holds now and did not in before: the
// engine's descriptors when before was taken just ahead of opening it
// (the /proc directory read and Go's os/exec pidfds left out).
func Opened(before map[string]bool) ([]string, error) {
	now, err := Targets()
	if err != nil {
		return nil, err
	}
	var out []string
	for target := range now {
		if !before[target] && !strings.HasPrefix(target, "/proc/") && target != "anon_inode:[pidfd]" {
			out = append(out, target)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Leaks reads a ChildMain report and returns the lines naming a descriptor
// of the engine: one of engine, or any eventfd, epoll, RDMA device file or
// shm segment (eventfds and epolls are named alike in every process, and
// the child, which makes none, may hold none). What else the child holds
// (the Go runtime's cgroup files, whatever its starter passed on) is not
// the engine's. A report without its "done" line is an error.
func Leaks(report string, engine []string) ([]string, error) {
	lines := strings.Split(strings.TrimSpace(report), "\n")
	if lines[len(lines)-1] != "done" {
		return nil, fmt.Errorf("fdcheck: the child's report is cut short: %q", report)
	}
	var leaks []string
	for _, l := range lines[:len(lines)-1] {
		f := strings.Fields(l)
		if len(f) < 3 {
			return nil, fmt.Errorf("fdcheck: bad report line %q", l)
		}
		t := f[2]
		if slices.Contains(engine, t) || strings.HasPrefix(t, "/dev/infiniband/") || strings.HasPrefix(t, "/memfd:hatrpc") ||
			t == "anon_inode:[eventfd]" || t == "anon_inode:[eventpoll]" || t == "anon_inode:[infinibandevent]" {
			leaks = append(leaks, l)
		}
	}
	return leaks, nil
}

// WhileChildren runs call(1), call(2), ... on a goroutine while it starts
// n pairs of children through os/exec, as a serving process running hooks
// would: /bin/true, and this test binary as ChildMain (its TestMain must
// call ChildMain when Env is set). Each pair starts once another call has
// succeeded, so calls and children interleave however slow either is. It
// returns how many calls succeeded (at least n) once the children are
// done, or the first call's error, a child's failure, or the first report
// naming one of engine (Leaks).
func WhileChildren(ctx context.Context, n int, engine []string, call func(i int) error) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	stop := make(chan struct{})
	progress := make(chan struct{}, 1)
	failed := make(chan struct{})
	var wg sync.WaitGroup
	var calls int
	var callErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if callErr = call(i); callErr != nil {
				close(failed)
				return
			}
			calls++
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	childErr := func() error {
		for i := 0; i < n; i++ {
			select {
			case <-progress:
			case <-failed:
				return nil // callErr says why
			case <-ctx.Done():
				return fmt.Errorf("fdcheck: no call succeeded before child %d: %w", i, ctx.Err())
			}
			if err := exec.CommandContext(ctx, "/bin/true").Run(); err != nil {
				return fmt.Errorf("fdcheck: /bin/true: %w", err)
			}
			cmd := exec.CommandContext(ctx, self, "-test.run=^$")
			cmd.Env = append(os.Environ(), Env+"=1")
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("fdcheck: child %d: %w", i, err)
			}
			leaks, err := Leaks(string(out), engine)
			if err != nil {
				return err
			}
			if len(leaks) > 0 {
				return fmt.Errorf("fdcheck: child %d holds engine descriptors: %q", i, leaks)
			}
		}
		return nil
	}()
	close(stop)
	wg.Wait()
	if err := errors.Join(childErr, callErr); err != nil {
		return calls, err
	}
	return calls, nil
}
