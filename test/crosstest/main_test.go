package crosstest_test

import (
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// TSimpleServer.Stop waits for open connections forever unless this is
	// set; a bounded wait keeps a failing test from hanging the run.
	thrift.ServerStopTimeout = 2 * time.Second
	goleak.VerifyTestMain(m)
}
