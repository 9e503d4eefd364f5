package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/tpch/dist"
	"github.com/hatrpc/hatrpc/tpch/duck"
)

// The tests share one DuckDB with TPC-H at SF 0.01 (dbgen takes seconds)
// and its published answers.
var (
	testDB      *sql.DB
	testQueries []string
	testAnswers []*Result
)

const testSF = 0.01

// hangMinute bounds a client's call or a query's run: a guard against a
// hang only (test/testenv.HangGuard scales it in the Soft-RoCE guest).
var hangMinute = testenv.HangGuard(time.Minute)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		// The distributed tests' workers are this binary (tpchBinary).
		os.Exit(worker(os.Args[2:]))
	}
	os.Exit(run(m))
}

// worker is `tpch worker` in a test binary.
func worker(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := dist.Command(ctx, os.Stdout, args); err != nil {
		fmt.Fprintln(os.Stderr, "tpch worker:", err)
		return 1
	}
	return 0
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	var err error
	testDB, err = duck.Open(ctx, testSF)
	if err == nil {
		testQueries, err = duck.Queries(ctx, testDB)
	}
	if err == nil {
		testAnswers, err = Answers(ctx, testDB, testSF)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := stopCluster(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := testDB.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
