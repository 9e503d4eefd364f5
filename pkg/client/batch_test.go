//go:build cgo && linux

package client_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// runConcurrent makes callers×calls echo calls of m and checks every reply.
func runConcurrent(t *testing.T, c *client.Conn, m *client.Method, callers, calls int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				msg := fmt.Sprintf("call-%d-%d", g, i)
				var res wiretest.EchoResult
				err := c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: msg}, &res)
				if err == nil && (res.Success == nil || *res.Success != msg) {
					err = fmt.Errorf("caller %d call %d: wrong reply", g, i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestBatching(t *testing.T) {
	cases := []struct {
		name        string
		set         hints.Set
		wantMax     int  // no batch may exceed this
		wantBatched bool // some batch carried more than one call
		autoN       func(n int) bool
	}{
		{"fixed", hints.Set{Protocol: hints.ProtoRFP, Batch: 8, BatchTimeout: 2 * time.Millisecond}, 8, true, nil},
		{"bytes", hints.Set{Protocol: hints.ProtoRFP, Batch: 64, BatchBytes: 150, BatchTimeout: 2 * time.Millisecond}, 3, true, nil},
		{"auto-relaxed", hints.Set{Protocol: hints.ProtoRFP, Batch: hints.BatchAuto, LatencyLimit: time.Hour,
			BatchTimeout: time.Millisecond}, 64, true, func(n int) bool { return n > 2 }},
		{"auto-strict", hints.Set{Protocol: hints.ProtoRFP, Batch: hints.BatchAuto, LatencyLimit: time.Nanosecond,
			BatchTimeout: time.Millisecond}, 64, false, func(n int) bool { return n == 1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := laneServer(t)
			c := dial(t, ts.addr)
			m := methodWith(tc.set)
			runConcurrent(t, c, m, 16, 40)
			n, sizes := c.BatchSizes("Echo:echo")
			total, batched := 0, false
			for _, s := range sizes {
				require.LessOrEqual(t, s, tc.wantMax)
				require.GreaterOrEqual(t, s, 1)
				total += s
				batched = batched || s > 1
			}
			require.Equal(t, 16*40, total, "every call went in exactly one batch")
			if tc.wantBatched {
				require.True(t, batched, "batches: %v", sizes)
			}
			if tc.autoN != nil {
				require.True(t, tc.autoN(n), "automatic N ended at %d", n)
			}
			require.Equal(t, float64(16*40), callsOn(t, ts, fastpathtest.Transport()))
		})
	}
}
