package hatkv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestClientCallsWithIdleGaps: callers that pause between calls (as YCSB
// threads, CLI users and the durability writer do) must each get their own
// reply, whether goroutines share connections or not. Every call runs
// under a deadline so a lost reply shows up as a failure, not a hang.
func TestClientCallsWithIdleGaps(t *testing.T) {
	tests := []struct {
		name   string
		conns  int
		shared bool // goroutines pick a connection per call (round robin)
	}{
		{"own connection per goroutine", 4, false},
		{"connections shared round robin", 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, "")
			ctx := testCtx(t, 60*time.Second)
			c, err := Dial(ctx, ts.addr, WithConns(tt.conns))
			require.NoError(t, err)
			defer closeWithin(t, c, 10*time.Second)
			var calls, wrong, failed atomic.Int64
			var mu sync.Mutex
			var first []string
			note := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				if len(first) < 5 {
					first = append(first, fmt.Sprintf(format, args...))
				}
			}
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				own := c.KV()
				kv := func() *hatkv.HatKVClient {
					if tt.shared {
						return c.KV()
					}
					return own
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 1))
					for i := 0; i < 200; i++ {
						if r.IntN(3) == 0 {
							time.Sleep(time.Duration(r.IntN(2500)) * time.Microsecond)
						}
						k := fmt.Sprintf("g%d-%d", g, i)
						cctx, cancel := context.WithTimeout(ctx, testenv.HangGuard(2*time.Second))
						err := kv().Put(cctx, k, hatkv.Record{"v": []byte(k)})
						var got hatkv.Record
						if err == nil {
							got, err = kv().Get(cctx, k, nil)
						}
						cancel()
						calls.Add(2)
						switch {
						case err != nil:
							failed.Add(1)
							note("%s: %v", k, err)
						case string(got["v"]) != k:
							wrong.Add(1)
							note("get %s returned %q", k, got["v"])
						}
					}
				}()
			}
			wg.Wait()
			assert.Zero(t, failed.Load()+wrong.Load(), "%d calls: %d failed, %d wrong replies; first: %v",
				calls.Load(), failed.Load(), wrong.Load(), first)
		})
	}
}
