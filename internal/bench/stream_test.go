package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStreamSystems streams through every in-process stream system and
// checks every message arrived (each one's length and ends are checked
// on the way).
func TestStreamSystems(t *testing.T) {
	for _, name := range []string{"hatrpc-stream", "hatrpc-stream-lanes", "hatrpc-unary", "raw-tcp-stream", "memmove"} {
		t.Run(name, func(t *testing.T) {
			require.True(t, IsStream(name))
			require.NotContains(t, TCPSystems(), name, "an echo sweep cannot run a stream system")
			sys, addr := startSystem(t, name)
			s, ok := sys.(streamer)
			require.True(t, ok)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, size := range []int{0, 64, 4 << 10, 64 << 10} {
				res, err := s.measureStream(ctx, addr, StreamSpec{Size: size, Count: 50, Warmup: 5})
				require.NoError(t, err, "size %d", size)
				assert.Equal(t, int64(50), res.Messages, "size %d", size)
				assert.Equal(t, int64(50*size), res.Bytes, "size %d", size)
				assert.Positive(t, res.Elapsed)
			}
			_, err := sys.Callers(ctx, addr, 1)
			require.ErrorIs(t, err, ErrNotStream)
		})
	}
}

// TestUnaryStopsAtMaxDur: hatrpc-unary's run ends at MaxDur with the
// calls it made (a count it cannot reach in time).
func TestUnaryStopsAtMaxDur(t *testing.T) {
	sys, addr := startSystem(t, "hatrpc-unary")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sys.(streamer).measureStream(ctx, addr, StreamSpec{Size: 64, Count: 1 << 40, MaxDur: 50 * time.Millisecond})
	require.NoError(t, err)
	assert.Positive(t, res.Messages)
	assert.Less(t, res.Messages, int64(1<<40))
	assert.Equal(t, 64*res.Messages, res.Bytes)
}

func TestRunStreamClientRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := RunClient(ctx, ClientSpec{System: "hatrpc", Addr: "127.0.0.1:1", Stream: &StreamSpec{Size: 64, Count: 1}})
	require.ErrorIs(t, err, ErrNotStream)
	_, err = RunClient(ctx, ClientSpec{System: "memmove", Stream: &StreamSpec{Size: 64, Count: 0}})
	require.EqualError(t, err, "bench: bad stream spec: size 64 (0..67108864), count 0 (>= 1), warm-up 0 (>= 0)")
	_, err = RunClient(ctx, ClientSpec{System: "grpc-stream", Addr: "127.0.0.1:1", Size: 64, Calls: 1})
	require.ErrorIs(t, err, ErrNotStream)
}

func TestGRPCStreamSystem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sys, err := Lookup("grpc-stream")
	require.NoError(t, err)
	assert.True(t, IsExternal("grpc-stream"))
	assert.True(t, IsStream("grpc-stream"))
	assert.False(t, IsStream("hatrpc"))
	_, err = sys.Serve(ctx, "127.0.0.1:0")
	require.ErrorIs(t, err, ErrProcessOnly)
	src, err := grpcStreamSrc()
	require.NoError(t, err)
	assert.FileExists(t, src+"/go.mod")

	spec := ClientSpec{Addr: "127.0.0.1:9", Stream: &StreamSpec{Size: 65536, Count: 16384, Warmup: 1000}}
	assert.Equal(t, "-role client -addr 127.0.0.1:9 -size 65536 -count 16384 -warmup 1000", strings.Join(grpcStreamClientArgs(spec), " "))
}

// The grpc-stream program's answer, as recorded from a run.
func TestDecodeStreamResult(t *testing.T) {
	spec := ClientSpec{System: "grpc-stream", Stream: &StreamSpec{Size: 64, Count: 200000}}
	tests := []struct {
		name    string
		out     string
		wantErr string
	}{
		{"ok", `{"stream":{"messages":200000,"bytes":12800000,"elapsed_ns":243458000}}` + "\n", ""},
		{"short", `{"stream":{"messages":199999,"bytes":12799936,"elapsed_ns":243458000}}`,
			`bench: child process failed: client output "{\"stream\":{\"messages\":199999,\"bytes\":12799936,\"elapsed_ns\":243458000}}": not a stream of 200000 messages of 64 bytes`},
		{"no stream", `{}`, `bench: child process failed: client output "{}": not a stream of 200000 messages of 64 bytes`},
		{"not json", `x`, `bench: child process failed: client output "x": invalid character 'x' looking for beginning of value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := decodeStreamResult(spec, []byte(tt.out))
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, spec, res.Spec)
			assert.InDelta(t, 821497, res.Stream.MsgsPerSec(), 1)
			assert.InDelta(t, 52.58, res.Stream.MBPerSec(), 0.01)
		})
	}
}

func TestStreamDriverValidate(t *testing.T) {
	ok := StreamDriver{Systems: []string{"memmove"}, Sizes: []int{64}, Bytes: 1 << 20, Reps: 1}
	require.NoError(t, ok.Validate())
	tests := []struct {
		name    string
		edit    func(d *StreamDriver)
		wantErr string
	}{
		{"echo system", func(d *StreamDriver) { d.Systems = []string{"hatrpc"} },
			"bench: bad stream run: hatrpc is not a stream system (have grpc-stream, hatrpc-stream, hatrpc-stream-lanes, hatrpc-unary, memmove, raw-tcp-stream)"},
		{"nothing", func(d *StreamDriver) { *d = StreamDriver{MaxMsgs: -1} },
			"bench: bad stream run: no systems; no sizes; bytes 0 <= 0; max messages -1 < 0; reps 0 < 1"},
		{"sizes", func(d *StreamDriver) { d.Sizes = []int{0, maxMessage + 1} },
			"bench: bad stream run: size 0 not in 1..67108864; size 67108865 not in 1..67108864"},
		{"unknown", func(d *StreamDriver) { d.Systems = []string{"nope"} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ok
			tt.edit(&d)
			err := d.Validate()
			if tt.wantErr == "" {
				require.ErrorIs(t, err, ErrUnknownSystem)
				return
			}
			require.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestStreamDriverCount(t *testing.T) {
	d := StreamDriver{Bytes: 1 << 30, MaxMsgs: 4_000_000}
	assert.Equal(t, int64(16384), d.Count(64<<10))
	assert.Equal(t, int64(4_000_000), d.Count(64), "capped")
	d.MaxMsgs = 0
	assert.Equal(t, int64(1<<24), d.Count(64))
	d.Bytes = 10
	assert.Equal(t, int64(1), d.Count(64), "at least one message")
}

func sr(msgs int64, size int, d time.Duration) StreamResult {
	return StreamResult{Messages: msgs, Bytes: msgs * int64(size), Elapsed: d}
}

func TestStreamGoalsAndReport(t *testing.T) {
	rows := []StreamRow{
		{Size: 64, Count: 1000, By: map[string]StreamResult{
			"hatrpc-stream": sr(1000, 64, time.Millisecond), // 1e6 msgs/s
			"grpc-stream":   sr(1000, 64, 2*time.Millisecond),
			"hatrpc-unary":  sr(40, 64, 2*time.Millisecond), // 2e4 calls/s
		}},
		{Size: 64 << 10, Count: 100, By: map[string]StreamResult{
			"hatrpc-stream":       sr(100, 64<<10, 10*time.Millisecond),
			"raw-tcp-stream":      sr(100, 64<<10, 9*time.Millisecond),
			"hatrpc-stream-lanes": sr(100, 64<<10, 10*time.Millisecond),
			"memmove":             sr(100, 64<<10, 1*time.Millisecond),
			"grpc-stream":         sr(100, 64<<10, 5*time.Millisecond),
		}},
	}
	goals := StreamGoals(rows)
	type g struct {
		goal  string
		size  int
		ratio float64
		ok    bool
	}
	var got []g
	for _, x := range goals {
		got = append(got, g{x.Goal, x.Size, float64(int(x.Ratio*100+0.5)) / 100, x.OK()})
	}
	assert.Equal(t, []g{
		{GoalGRPC, 64, 2, true},
		{GoalSmall, 64, 50, true},
		{GoalBulkTCP, 64 << 10, 0.9, true},
		{GoalBulkShm, 64 << 10, 0.1, false},
		{GoalGRPC, 64 << 10, 0.5, false},
	}, got)

	var b bytes.Buffer
	systems := []string{"hatrpc-stream", "hatrpc-stream-lanes", "grpc-stream", "raw-tcp-stream", "memmove", "hatrpc-unary"}
	require.NoError(t, WriteStreamReport(&b, systems, rows, 1<<30))
	out := b.String()
	t.Log("\n" + out)
	assert.Contains(t, out, "goals (issue 46; bulk goals state 1 GiB, this run moved 1GiB per point)")
	assert.Regexp(t, `64 B stream msgs/s vs unary calls/s, 1 caller +64B +50\.00x hatrpc-stream/hatrpc-unary +>= 5\.0x +ok`, out)
	assert.Regexp(t, `bulk with shm lanes vs 1-core memmove +64KiB +0\.10x hatrpc-stream-lanes/memmove +>= 0\.8x +MISS *\n`, out)
	assert.Regexp(t, `(?m)^ +64B +1000 +64\.0 +- +32\.0 +- +- +1\.3 *$`, out)

	b.Reset()
	require.NoError(t, WriteStreamReport(&b, []string{"memmove"}, []StreamRow{{Size: 64, Count: 1, By: map[string]StreamResult{"memmove": sr(1, 64, time.Microsecond)}}}, 64))
	assert.Contains(t, b.String(), "none measured")
}

// BenchmarkStream is one stream system in process (server and client
// share it), for profiling (-cpuprofile) a stream's per-message costs;
// cmd/atb-tcp -stream-sizes is the authoritative comparison.
func BenchmarkStream(b *testing.B) {
	for _, name := range []string{"hatrpc-stream", "hatrpc-stream-lanes", "raw-tcp-stream"} {
		for _, size := range []int{64, 4 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%s", name, SizeLabel(size)), func(b *testing.B) {
				sys, addr := startSystem(b, name)
				s := sys.(streamer)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				cpu := SelfCPU()
				res, err := s.measureStream(ctx, addr, StreamSpec{Size: size, Count: int64(b.N), Warmup: 100})
				// CPU time, server and client together: less sensitive to
				// other load than the speed (spinning waits count too).
				b.ReportMetric(float64(SelfCPU()-cpu)/float64(b.N), "cpu-ns/op")
				require.NoError(b, err)
				require.Equal(b, int64(b.N), res.Messages)
			})
		}
	}
}
