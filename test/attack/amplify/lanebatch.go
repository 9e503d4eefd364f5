package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gen "github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// laneBatch is D9 as far as a client can send it: c.calls (200) Scans
// of 10,000 records at once on a dedicated shm lane whose client hints
// batch them (64 calls a batch, the client's most), so each KindBatch
// asks for about 64 × 10 MB of replies, far past the lane's maximum.
// The server (hatkv serve --transport shm, HATRPC_PROVIDER=shm) must
// answer the calls that fit and refuse the others, no call waiting for
// its timeout.
func laneBatch(c config, _ func(net.Conn), _ <-chan struct{}) (func() string, error) {
	ctx := context.Background()
	conn, err := client.Dial(ctx, c.addr, client.WithRDMA("shm"))
	if err != nil {
		return nil, err
	}
	const fn = "HatKV:Scan"
	m := &client.Method{Service: "HatKV", Name: "Scan", Hints: &hints.Function{Name: "Scan",
		Client: hints.Set{Protocol: hints.ProtoRFP, Batch: 64, BatchTimeout: 50 * time.Millisecond}}}
	calls := c.calls
	if calls == 0 {
		calls = 200
	}
	var (
		wg                   sync.WaitGroup
		ok, refused, other   atomic.Int64
		firstOther, firstRef atomic.Value
		slowest              atomic.Int64
	)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			t0 := time.Now()
			var res gen.HatKVScanResult
			err := conn.Call(cctx, m, &gen.HatKVScanArgs{Count: 10000}, &res)
			for d := int64(time.Since(t0)); ; {
				s := slowest.Load()
				if d <= s || slowest.CompareAndSwap(s, d) {
					break
				}
			}
			var ae *proto.ApplicationException
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &ae) && strings.Contains(ae.Message, "does not fit"):
				refused.Add(1)
				firstRef.CompareAndSwap(nil, ae.Message)
			default:
				other.Add(1)
				firstOther.CompareAndSwap(nil, err.Error())
			}
		}()
	}
	return func() string {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(70 * time.Second):
		}
		_, sizes := conn.BatchSizes(fn)
		s := fmt.Sprintf("transport %s, batches %v: %d answered, %d refused, %d other errors, slowest call %v",
			conn.Plan(fn).Transport, sizes, ok.Load(), refused.Load(), other.Load(), time.Duration(slowest.Load()).Round(time.Millisecond))
		if v := firstRef.Load(); v != nil {
			s += "; refusal: " + v.(string)
		}
		if v := firstOther.Load(); v != nil {
			s += "; other error: " + v.(string)
		}
		_ = conn.Close()
		return s
	}, nil
}
