package testenv

import (
	"os"
	"strconv"
	"time"
)

// HangScaleEnv names the factor HangGuard multiplies by. test/rxe/suite.sh
// sets it inside the Soft-RoCE guest, where everything runs under TCG
// emulation, often on a host busy with other work.
const HangScaleEnv = "HATRPC_HANG_SCALE"

var hangScale = func() time.Duration {
	if f, err := strconv.Atoi(os.Getenv(HangScaleEnv)); err == nil && f > 1 {
		return time.Duration(f)
	}
	return 1
}()

// HangGuard scales a deadline that only guards a test against a hang (it
// asserts nothing about speed) to the environment: d on a plain host, d
// times $HATRPC_HANG_SCALE where that is set. A deadline that is an
// assertion about time must not use it.
func HangGuard(d time.Duration) time.Duration { return d * hangScale }
