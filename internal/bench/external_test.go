package bench

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// The external systems' programs (Debian's ucx_perftest, the C++ Apache
// server and client) are not installed where the tests run (`make deps`
// leaves them to `make deps-bench`, which makes calls through each): the
// tests here check what the harness reads from them against output the
// programs printed, recorded.

// ucxSample is `ucx_perftest 127.0.0.1 -t tag_lat -s 64 -n 20000 -f -v`
// (UCX 1.13, UCX_TLS=sm), recorded 2026-12-02.
const ucxSample = "iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n" +
	"20000,0.585,0.598,0.598,102.01,102.01,1671341,1671341\n"

func TestParseUCXPerftest(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    ucxResult
		wantErr bool
	}{
		{name: "p50", out: ucxSample, want: ucxResult{iters: 20000, percentile: 1170 * time.Nanosecond, avg: 1196 * time.Nanosecond}},
		{
			name: "p99.9 after UCX's log lines",
			out: "[1796210825.310282] [vm:14267:0] perftest.c:405 UCX WARN something\n" +
				"iterations,99.9_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n" +
				"3000,12.500,0.700,0.700,87.46,87.46,1432921,1432921\n",
			want: ucxResult{iters: 3000, percentile: 25 * time.Microsecond, avg: 1400 * time.Nanosecond},
		},
		{name: "empty", out: "", wantErr: true},
		{name: "header only", out: strings.SplitAfter(ucxSample, "\n")[0], wantErr: true},
		{name: "table format (no -v)", out: "  20000      0.585     0.598     0.598      102.01     102.01    1671341    1671341\n", wantErr: true},
		{name: "short line", out: "iterations,50.0_percentile_lat,avg_lat,overall_lat\n20000,0.585\n", wantErr: true},
		{name: "zero latency", out: "iterations,50.0_percentile_lat,avg_lat\n20000,0,0.5\n", wantErr: true},
		{name: "not a number", out: "iterations,50.0_percentile_lat,avg_lat\n20000,fast,0.5\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseUCXPerftest([]byte(tt.out))
			if tt.wantErr {
				require.ErrorIs(t, err, errUCXOutput)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseUCXPerftest(f *testing.F) {
	f.Add([]byte(ucxSample))
	f.Add([]byte("iterations,50.0_percentile_lat,avg_lat\n1,1e308,-1\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := parseUCXPerftest(out)
		if err == nil && (r.iters < 1 || r.percentile < 0 || r.avg < 0) {
			t.Fatalf("accepted %q as %+v", out, r)
		}
	})
}

func TestParseAddrLine(t *testing.T) {
	tests := []struct {
		line string
		addr string
		pid  int
		ok   bool
	}{
		{"ADDR 127.0.0.1:4000\n", "127.0.0.1:4000", 0, true},
		{"ADDR 127.0.0.1:4000 pid=123\n", "127.0.0.1:4000", 123, true},
		{"ADDR 127.0.0.1:4000 pid=0\n", "", 0, false},
		{"ADDR 127.0.0.1:4000 pid=x\n", "", 0, false},
		{"ADDR 127.0.0.1:4000 123\n", "", 0, false},
		{"ADDR 127.0.0.1:4000 pid=1 more\n", "", 0, false},
		{"ADDR \n", "", 0, false},
		{"listening on 127.0.0.1:4000\n", "", 0, false},
	}
	for _, tt := range tests {
		addr, pid, ok := parseAddrLine(tt.line)
		assert.Equal(t, tt.ok, ok, "%q", tt.line)
		assert.Equal(t, tt.addr, addr, "%q", tt.line)
		assert.Equal(t, tt.pid, pid, "%q", tt.line)
	}
}

func FuzzParseAddrLine(f *testing.F) {
	f.Add("ADDR 127.0.0.1:4000 pid=123\n")
	f.Add("ADDR x")
	f.Fuzz(func(t *testing.T, line string) {
		addr, pid, ok := parseAddrLine(line)
		if ok && (addr == "" || pid < 0 || strings.ContainsAny(addr, " \n")) {
			t.Fatalf("accepted %q as %q pid %d", line, addr, pid)
		}
	})
}

func TestDecodeExternalResult(t *testing.T) {
	// What atb-apache-cpp-client printed, 2026-12-02.
	const (
		lat  = `{"latency":{"calls":2000,"p50_ns":17178,"p99_ns":87309,"p999_ns":213662,"mean_ns":25032}}` + "\n"
		tput = `{"throughput":{"callers":8,"calls":15939,"elapsed_ns":300117897,"p50_ns":124919,"p99_ns":501588,"client_cpu_ns":288737000,"server_cpu_ns":330000000}}` + "\n"
	)
	latSpec := ClientSpec{System: "apache-cpp-threaded", Addr: "127.0.0.1:1", Size: 64, Calls: 2000}
	tputSpec := ClientSpec{System: "apache-cpp-threaded", Addr: "127.0.0.1:1", Size: 4096, Callers: 8, Duration: 300 * time.Millisecond}

	res, err := decodeExternalResult(latSpec, []byte(lat))
	require.NoError(t, err)
	assert.Equal(t, latSpec, res.Spec)
	assert.Equal(t, LatencyResult{Calls: 2000, P50: 17178, P99: 87309, P999: 213662, Mean: 25032}, *res.Latency)

	res, err = decodeExternalResult(tputSpec, []byte(tput))
	require.NoError(t, err)
	want := ThroughputResult{Callers: 8, Calls: 15939, Elapsed: 300117897, P50: 124919, P99: 501588,
		ClientCPU: 288737 * time.Microsecond, ServerCPU: 330 * time.Millisecond}
	assert.Equal(t, want, *res.Throughput)

	for _, bad := range []struct {
		spec ClientSpec
		out  string
	}{
		{latSpec, tput}, // answered another question
		{tputSpec, lat}, // same
		{latSpec, `{"latency":{"calls":0}}`},
		{tputSpec, strings.Replace(tput, `"callers":8`, `"callers":4`, 1)},
		{latSpec, "Thrift: TSocket::open() connect() <Host: 127.0.0.1 Port: 1>: Connection refused"},
	} {
		_, err := decodeExternalResult(bad.spec, []byte(bad.out))
		require.ErrorIs(t, err, ErrChild, "%q", bad.out)
	}
}

func TestApacheCppClientArgs(t *testing.T) {
	tests := []struct {
		spec ClientSpec
		want string
	}{
		{
			ClientSpec{Addr: "127.0.0.1:9", Size: 64, Warmup: 300, WarmupFor: 50 * time.Millisecond, Calls: 3000},
			"-addr 127.0.0.1:9 -size 64 -warmup 300 -warmup-ns 50000000 -calls 3000",
		},
		{
			ClientSpec{Addr: "127.0.0.1:9", Size: 512, Callers: 64, Duration: time.Second, ServerPID: 42},
			"-addr 127.0.0.1:9 -size 512 -callers 64 -duration-ns 1000000000 -server-pid 42",
		},
		{
			ClientSpec{Addr: "127.0.0.1:9", Size: 512, Callers: 1, Duration: time.Second},
			"-addr 127.0.0.1:9 -size 512 -callers 1 -duration-ns 1000000000",
		},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, strings.Join(apacheCppClientArgs(tt.spec), " "))
	}
}

func TestExternalSystems(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tests := []struct {
		name        string
		latencyOnly bool
		tcp         bool
	}{
		{"apache-cpp-threaded", false, true},
		{"apache-cpp-nonblocking", false, true},
		{"ucx-sm", true, false},
		{"ucx-sm-am", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys, err := Lookup(tt.name)
			require.NoError(t, err)
			assert.True(t, IsExternal(tt.name))
			assert.Equal(t, tt.latencyOnly, LatencyOnly(tt.name))
			assert.Equal(t, tt.tcp, contains(TCPSystems(), tt.name))
			_, err = sys.Serve(ctx, "127.0.0.1:0")
			require.ErrorIs(t, err, ErrProcessOnly)
			_, err = sys.Callers(ctx, "127.0.0.1:1", 1)
			require.ErrorIs(t, err, ErrProcessOnly)
		})
	}
	assert.False(t, IsExternal("hatrpc"))
	assert.False(t, LatencyOnly("hatrpc"))
	assert.True(t, LatencyOnly("ucx-sm"+BaselineSuffix), "a baseline's ucx-sm is latency-only too")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// The runner builds the C++ programs from the embedded copies: every file
// the Makefile needs must be among them.
func TestApacheCppSourcesEmbedded(t *testing.T) {
	var got []string
	err := fs.WalkDir(apacheCppSrc, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, p)
		}
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"apachecpp/Makefile", "apachecpp/client.cpp", "apachecpp/common.h", "apachecpp/server.cpp", "idl/atb_plain.thrift"}, got)
}

// UCX in the engine report: its own row in the latency table and CSV,
// an empty one in the throughput table, and issue 47's goal 1 against the better
// of tag and am.
func TestUCXInEngineReport(t *testing.T) {
	imm := Engine{Proto: rdma.ProtoDirectWriteIMM}.Name()
	lanes := Hat{Lanes: true}.Name()
	systems := []string{imm, lanes, "ucx-sm", "ucx-sm-am"}
	lat := []LatencyRow{{Placement: "unpinned", Size: 64, By: map[string]LatencyResult{
		imm:         {P50: 1900 * time.Nanosecond, P99: 3 * time.Microsecond},
		lanes:       {P50: 2500 * time.Nanosecond, P99: 4 * time.Microsecond, P999: 15 * time.Microsecond},
		"ucx-sm":    {P50: 1200 * time.Nanosecond, P99: 2 * time.Microsecond, P999: 5 * time.Microsecond},
		"ucx-sm-am": {P50: 1000 * time.Nanosecond, P99: 2 * time.Microsecond},
	}}}
	large := func(callers, engine, lanesCalls int64) ThroughputRow {
		return ThroughputRow{Size: 128 << 10, Callers: int(callers), By: map[string]ThroughputResult{
			imm: {Calls: engine, Elapsed: time.Second}, lanes: {Calls: lanesCalls, Elapsed: time.Second},
		}}
	}
	tput := []ThroughputRow{{Size: 512, Callers: 1, By: map[string]ThroughputResult{
		imm: {Calls: 100000, Elapsed: time.Second}, lanes: {Calls: 50000, Elapsed: time.Second},
	}}, large(1, 50000, 10000), large(8, 50000, 40000), large(16, 50000, 46000)}

	var b bytes.Buffer
	WriteEngineVerdicts(&b, lat, tput)
	assert.Contains(t, b.String(), "- 64B engine p50 ≤ UCX shared-memory round trip: best engine direct_write_imm 1.90 µs, ucx-sm-am 1.00 µs, 1.90×: **MISS**\n")
	assert.Contains(t, b.String(), "- 64B lanes p50 ≤ 1.2× best engine: 2.50 µs, 1.32×: **MISS**\n")
	assert.Contains(t, b.String(), "- 64B lanes p99.9 ≤ 5× their p50: 15.00 / 2.50 µs, 6.0×: **MISS**\n")
	assert.Contains(t, b.String(), "- 128KiB lanes ≥ 0.9× best engine calls/s: c8 0.80 (direct_write_imm); c16 0.92 (direct_write_imm): **MISS**\n",
		"1 caller is not one of goal 3's caller counts")
	for i := range tput[1:] {
		tput[1+i].By[lanes] = ThroughputResult{Calls: 45000, Elapsed: time.Second}
	}
	b.Reset()
	WriteEngineVerdicts(&b, lat, tput)
	assert.Contains(t, b.String(), "c8 0.90 (direct_write_imm); c16 0.90 (direct_write_imm): **ok**\n")

	b.Reset()
	WriteEngineLatencyTable(&b, systems, lat)
	assert.Contains(t, b.String(), "| ucx-sm (ucx_perftest -t tag_lat, UCX_TLS=sm, one way ×2) | 1.2 / 2.0 / 5.0 |")

	b.Reset()
	WriteEngineThroughputTable(&b, systems, tput, 512)
	assert.Contains(t, b.String(), "\n| ucx-sm | - |\n", "latency only: a row, never measured")

	b.Reset()
	require.NoError(t, WriteLatencyCSV(&b, systems, lat))
	assert.Contains(t, b.String(), "ucx-sm,tag_lat,64,1.20,2.00,0.00,busy,ucx-sm,5.00\n")
}
