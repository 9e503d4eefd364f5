package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// TestEightClients: eight sessions at once, half over lanes, half plain
// Thrift, each running every query (in a different order) and getting the
// published answers.
func TestEightClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(8*time.Minute))
	defer cancel()
	srv, err := Serve(testDB, "127.0.0.1:0", hs2.Function, fastpathtest.Provider())
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Shutdown(ctx)) }()

	const clients = 8
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- runClient(ctx, srv.Addr, i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

func runClient(ctx context.Context, addr string, i int) (err error) {
	var s Session
	if i%2 == 0 {
		s, err = OpenHatRPC(ctx, addr, hs2.Function, fastpathtest.Provider())
	} else {
		s, err = OpenApache(ctx, addr, hangMinute)
	}
	if err != nil {
		return fmt.Errorf("client %d: %w", i, err)
	}
	defer func() {
		if cerr := s.Close(ctx); err == nil && cerr != nil {
			err = fmt.Errorf("client %d: close: %w", i, cerr)
		}
	}()
	for k := range 22 {
		q := (k+3*i)%22 + 1
		got, err := s.Query(ctx, testQueries[q])
		if err != nil {
			return fmt.Errorf("client %d Q%d: %w", i, q, err)
		}
		if err := Compare(got, testAnswers[q]); err != nil {
			return fmt.Errorf("client %d Q%d: %w", i, q, err)
		}
	}
	return nil
}
