package bench

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/bench/gen/atb"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// keepingEcho answers with a copy and keeps every argument it was given,
// so the test can check later that no argument was overwritten.
type keepingEcho struct {
	mu   sync.Mutex
	args [][]byte
}

func (k *keepingEcho) Echo(_ context.Context, payload []byte) ([]byte, error) {
	k.mu.Lock()
	k.args = append(k.args, payload)
	k.mu.Unlock()
	return bytes.Clone(payload), nil
}

// TestLargePayloadOwnership: large binaries are decoded by aliasing pooled
// frame buffers on both ends (wire.DecodeAliased / wire.Adopt). Arguments
// a handler keeps and results a caller keeps must stay intact however many
// calls and collections follow.
func TestLargePayloadOwnership(t *testing.T) {
	tests := []struct {
		name string
		size int
		opts []client.Option
	}{
		{"64KiB binary", 64 << 10, nil},
		{"200KiB binary", 200 << 10, nil},
		{"64KiB compact", 64 << 10, []client.Option{client.WithCompact()}},
		{"1KiB (copied)", 1 << 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			lim := proto.DefaultLimits
			lim.MaxMessageSize, lim.MaxStringLength = maxMessage, maxMessage
			srv := server.New(server.WithLimits(lim), server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			h := &keepingEcho{}
			atb.RegisterEcho(srv, h)
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			defer func() {
				require.NoError(t, srv.Shutdown(ctx))
				<-served
			}()
			conn, err := client.Dial(ctx, ln.Addr().String(), tt.opts...)
			require.NoError(t, err)
			defer conn.Close()
			c := atb.NewEchoClient(conn)

			const callers, calls = 8, 12
			pattern := func(g, i int) []byte {
				return bytes.Repeat([]byte{byte(g*calls + i + 1)}, tt.size)
			}
			kept := make([][][]byte, callers)
			var wg sync.WaitGroup
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range calls {
						rep, err := c.Echo(ctx, pattern(g, i))
						if !assert.NoError(t, err) {
							return
						}
						kept[g] = append(kept[g], rep)
						if i%4 == 3 {
							runtime.GC() // lets finalizers recycle buffers nobody holds
						}
					}
				}()
			}
			wg.Wait()
			runtime.GC()
			runtime.GC()
			// Recycled buffers are reused by these calls; the kept ones must not be.
			for i := range 2 * calls {
				_, err := c.Echo(ctx, bytes.Repeat([]byte{0xee}, tt.size))
				require.NoError(t, err, "filler %d", i)
			}
			for g := range callers {
				require.Len(t, kept[g], calls)
				for i, rep := range kept[g] {
					assert.True(t, bytes.Equal(pattern(g, i), rep), "caller %d call %d: result overwritten", g, i)
				}
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, a := range h.args {
				require.Len(t, a, tt.size)
				assert.True(t, bytes.Equal(a, bytes.Repeat(a[:1], tt.size)), "handler argument overwritten")
			}
		})
	}
}
