package kvstore

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runDurabilityChild())
	}
	goleak.VerifyTestMain(m)
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ycsbRecord(key string, fields, size int) Record {
	r := make(Record, fields)
	for i := 0; i < fields; i++ {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte('a' + (len(key)+i+j)%26)
		}
		r[fmt.Sprintf("field%d", i)] = v
	}
	return r
}

// insertUntilFull inserts key000000, key000001, ... until an insert fails
// (at most 100,000), and returns how many went in and the failure.
func insertUntilFull(ctx context.Context, s *Store) (int, error) {
	for n := 0; n < 100000; n++ {
		if err := s.Insert(ctx, fmt.Sprintf("key%06d", n), ycsbRecord("k", 10, 100)); err != nil {
			return n, err
		}
	}
	return 100000, nil
}

func openTest(t testing.TB, opts ...Option) *Store {
	t.Helper()
	s, err := Open(testCtx(t), t.TempDir(), append([]Option{WithSync(SyncNoSync), WithMapSize(64 << 20)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}
