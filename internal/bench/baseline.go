package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// BaselineSuffix marks a system another build of the runner serves and
// calls: with SetBaseline(path), "hatrpc-lanes@base" is path's
// hatrpc-lanes, measured in the same run as this build's (reps taking
// turns, as every system's do). Old build against new in one run is the
// only comparison this host's noise leaves fine enough for tens of
// nanoseconds (docs/performance/history.md, "Paired builds"):
// alternating runs of two binaries see the engine move 0.3 µs between
// minutes.
const BaselineSuffix = "@base"

var (
	baselineMu  sync.Mutex
	baselineBin string
)

// ErrNoBaseline means a system carries BaselineSuffix but no baseline
// binary was set.
var ErrNoBaseline = errors.New("bench: no baseline binary (-baseline) for a system named *" + BaselineSuffix)

// SetBaseline names the runner binary that serves and calls the systems
// named with BaselineSuffix; "" unsets it.
func SetBaseline(path string) error {
	if path != "" {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%s: not an executable file", path)
		}
	}
	baselineMu.Lock()
	defer baselineMu.Unlock()
	baselineBin = path
	return nil
}

// BaseName is the system a name stands for in whichever build runs it:
// name without BaselineSuffix.
func BaseName(name string) string {
	base, _ := strings.CutSuffix(name, BaselineSuffix)
	return base
}

// binaryFor is the binary that runs system's server and client processes
// and the system's name in it: the baseline's for a name with
// BaselineSuffix, this one's otherwise.
func binaryFor(system string) (bin, name string, err error) {
	base, ok := strings.CutSuffix(system, BaselineSuffix)
	if !ok {
		bin, err = os.Executable()
		return bin, system, err
	}
	baselineMu.Lock()
	defer baselineMu.Unlock()
	if baselineBin == "" {
		return "", "", fmt.Errorf("%w: %s", ErrNoBaseline, system)
	}
	return baselineBin, base, nil
}

// baselineSystem is a system of the baseline build, as this build's
// driver sees it: a name. Its processes run the baseline binary (see
// binaryFor), so it serves and calls nothing in this process.
type baselineSystem struct{ name string }

func (s baselineSystem) Name() string { return s.name }

var errBaselineInProcess = errors.New("bench: a baseline system runs in the baseline binary, not in process")

func (baselineSystem) Serve(context.Context, string) (Server, error) {
	return nil, errBaselineInProcess
}

func (baselineSystem) Callers(context.Context, string, int) ([]Caller, error) {
	return nil, errBaselineInProcess
}
