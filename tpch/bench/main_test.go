package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

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

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
