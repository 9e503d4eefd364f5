package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/goleak"
)

// Resources is what a process held at one moment: its goroutines (by id)
// and open descriptors (by number and what each names; a new fd that
// reuses a closed one's number for the same file is not told apart). A test compares
// a later moment with it by what is new, not by counts: a goroutine or
// fd an earlier test left may end meanwhile, and a count would let that
// hide a leak of the test's own.
type Resources struct {
	goroutines goleak.Option
	fds        map[string]string
}

// Snapshot records what the process holds now.
func Snapshot() (Resources, error) {
	fds, err := openFDs()
	return Resources{goroutines: goleak.IgnoreCurrent(), fds: fds}, err
}

// Settled polls New until it reports nothing or within has passed, and
// returns its last answer: what ends asynchronously (a parker, a
// handler's goroutine) has that long to go.
func (r Resources) Settled(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := r.New()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// New returns an error naming every goroutine started and every fd opened
// since the snapshot that still exists (nil when there is none). It
// looks once.
func (r Resources) New() error {
	fds, err := openFDs()
	if err != nil {
		return err
	}
	var extra []string
	for fd, target := range fds {
		if was, ok := r.fds[fd]; !ok || was != target {
			extra = append(extra, fd+" -> "+target)
		}
	}
	sort.Strings(extra)
	// goleak retries with back-off before it reports; its own test
	// goroutine and the runtime's are not counted.
	gerr := goleak.Find(r.goroutines)
	switch {
	case len(extra) > 0 && gerr != nil:
		return fmt.Errorf("new fds: %s; %w", strings.Join(extra, ", "), gerr)
	case len(extra) > 0:
		return fmt.Errorf("new fds: %s", strings.Join(extra, ", "))
	}
	return gerr
}

func openFDs() (map[string]string, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ents))
	for _, e := range ents {
		// The directory's own fd is gone by the time it is read.
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil {
			out[e.Name()] = target
		}
	}
	return out, nil
}
