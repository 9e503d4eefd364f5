package testutil

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// InParallel runs f(0) … f(g-1) in g goroutines and fails t with every
// error they return. (pkg/flock's own tests keep a copy: this package
// imports pkg/flock, so its internal tests cannot import this one.)
func InParallel(t testing.TB, g int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for i := range g {
		wg.Go(func() {
			if err := f(i); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
