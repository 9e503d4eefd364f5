package hints

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testFile = "svc.thrift"

// ent builds an entry at line:col whose value starts right after `key=`.
func ent(line, col int, key, value string, kind ValueKind) RawEntry {
	return RawEntry{Key: key, Value: value, Kind: kind,
		Pos:      Pos{testFile, line, col},
		ValuePos: Pos{testFile, line, col + len(key) + 1}}
}

func id(line, col int, key, value string) RawEntry  { return ent(line, col, key, value, ValueIdent) }
func num(line, col int, key, value string) RawEntry { return ent(line, col, key, value, ValueNumber) }

func grp(side RawSide, line int, entries ...RawEntry) RawGroup {
	return RawGroup{Side: side, Entries: entries, Pos: Pos{testFile, line, 3}}
}

func TestPosString(t *testing.T) {
	assert.Equal(t, "a/b.thrift:3:9", Pos{"a/b.thrift", 3, 9}.String())
}

// precedenceService exercises every level: service shared, service
// side-specific, function shared and function side-specific.
func precedenceService(t *testing.T) *Resolution {
	t.Helper()
	svc := []RawGroup{
		grp(RawShared, 2, id(2, 9, "perf_goal", "throughput"), num(2, 30, "concurrency", "64"), id(2, 50, "kv.sync", "nosync")),
		grp(RawServer, 3, id(3, 11, "polling", "event")),
		grp(RawClient, 4, id(4, 11, "perf_pref", "busy"), id(4, 30, "kv.mode", "fast")),
	}
	funcs := []RawFunction{
		{Name: "plain", Pos: Pos{testFile, 6, 3}},
		{Name: "fshared", Pos: Pos{testFile, 7, 3}, Groups: []RawGroup{
			grp(RawShared, 7, id(7, 20, "polling", "adaptive"), id(7, 40, "kv.sync", "sync")),
		}},
		{Name: "fside", Pos: Pos{testFile, 8, 3}, Groups: []RawGroup{
			grp(RawShared, 8, id(8, 20, "polling", "adaptive"), id(8, 40, "perf_goal", "latency")),
			grp(RawClient, 8, id(8, 60, "polling", "event"), id(8, 80, "kv.mode", "slow")),
		}},
	}
	res, err := Resolve("KV", svc, funcs)
	require.NoError(t, err)
	return res
}

func TestResolvePrecedence(t *testing.T) {
	res := precedenceService(t)
	type want struct {
		value string
		level Level
		pos   string // Origin.String()
	}
	tests := []struct {
		fn   string
		side Side
		key  string
		want want
	}{
		// service level: side-specific > shared > default
		{"", SideServer, "polling", want{"event", LevelServiceSide, "svc.thrift:3:11"}},
		{"", SideClient, "polling", want{"busy", LevelServiceSide, "svc.thrift:4:11"}},
		{"", SideClient, "perf_goal", want{"throughput", LevelServiceShared, "svc.thrift:2:9"}},
		{"", SideClient, "protocol", want{"auto", LevelDefault, "default"}},
		// a function without hints inherits the service
		{"plain", SideServer, "polling", want{"event", LevelServiceSide, "svc.thrift:3:11"}},
		{"plain", SideClient, "polling", want{"busy", LevelServiceSide, "svc.thrift:4:11"}},
		{"plain", SideServer, "concurrency", want{"64", LevelServiceShared, "svc.thrift:2:30"}},
		{"plain", SideServer, "eager_threshold", want{"4KiB", LevelDefault, "default"}},
		// function shared beats service side-specific
		{"fshared", SideServer, "polling", want{"adaptive", LevelFunctionShared, "svc.thrift:7:20"}},
		{"fshared", SideClient, "polling", want{"adaptive", LevelFunctionShared, "svc.thrift:7:20"}},
		{"fshared", SideClient, "perf_goal", want{"throughput", LevelServiceShared, "svc.thrift:2:9"}},
		// function side-specific beats function shared
		{"fside", SideClient, "polling", want{"event", LevelFunctionSide, "svc.thrift:8:60"}},
		{"fside", SideServer, "polling", want{"adaptive", LevelFunctionShared, "svc.thrift:8:20"}},
		{"fside", SideServer, "perf_goal", want{"latency", LevelFunctionShared, "svc.thrift:8:40"}},
		// application keys follow the same order
		{"plain", SideServer, "kv.sync", want{"nosync", LevelServiceShared, "svc.thrift:2:50"}},
		{"fshared", SideServer, "kv.sync", want{"sync", LevelFunctionShared, "svc.thrift:7:40"}},
		{"fside", SideClient, "kv.mode", want{"slow", LevelFunctionSide, "svc.thrift:8:80"}},
		{"fshared", SideClient, "kv.mode", want{"fast", LevelServiceSide, "svc.thrift:4:30"}},
		// lookups by alias find the canonical key
		{"fside", SideClient, "perf_pref", want{"event", LevelFunctionSide, "svc.thrift:8:60"}},
		{"fside", SideClient, "proto", want{"auto", LevelDefault, "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.fn+"/"+tt.side.String()+"/"+tt.key, func(t *testing.T) {
			v, ok := res.Lookup(tt.fn, tt.side, tt.key)
			require.True(t, ok)
			assert.Equal(t, tt.want.value, v.Value)
			assert.Equal(t, tt.want.level, v.Origin.Level)
			assert.Equal(t, tt.want.pos, v.Origin.String())
		})
	}
	_, ok := res.Lookup("missing", SideClient, "polling")
	assert.False(t, ok)
	_, ok = res.Lookup("plain", SideClient, "kv.nothing")
	assert.False(t, ok)

	// The typed sets agree with the recorded values.
	fside := res.Function("fside")
	require.NotNil(t, fside)
	assert.Equal(t, Set{PerfGoal: Latency, Concurrency: 64, Polling: PollEvent,
		App: map[string]string{"kv.sync": "nosync", "kv.mode": "slow"}}, fside.Client.Set)
	assert.Equal(t, Set{PerfGoal: Latency, Concurrency: 64, Polling: PollAdaptive,
		App: map[string]string{"kv.sync": "nosync"}}, fside.Server.Set)
	assert.Equal(t, "svc.thrift:8:60 (function c_hint)", fside.Client.Values[3].Origin.Describe())
	assert.Equal(t, "svc.thrift:2:30 (service hint)", fside.Client.Values[1].Origin.Describe())
	assert.Equal(t, "default", fside.Client.Values[4].Origin.Describe())
}

// TestResolveServerSwitches: never_blocks and borrow_ctx are server-side
// only, like borrow_args; a function's value beats its service's.
func TestResolveServerSwitches(t *testing.T) {
	for _, key := range []struct {
		name string
		get  func(Set) bool
	}{
		{"never_blocks", func(s Set) bool { return s.NeverBlocks }},
		{"borrow_ctx", func(s Set) bool { return s.BorrowCtx }},
	} {
		tests := []struct {
			name    string
			service []RawGroup
			group   RawGroup
			want    bool
			value   string
		}{
			{"shared group", nil, grp(RawShared, 5, id(5, 9, key.name, "on")), true, "on"},
			{"s_hint, alias spelling", nil, grp(RawServer, 5, id(5, 11, key.name, "true")), true, "on"},
			{"function off beats service on", []RawGroup{grp(RawServer, 2, id(2, 11, key.name, "on"))},
				grp(RawServer, 5, id(5, 11, key.name, "off")), false, "off"},
		}
		for _, tt := range tests {
			t.Run(key.name+"/"+tt.name, func(t *testing.T) {
				res, err := Resolve("S", tt.service, []RawFunction{{Name: "put", Pos: Pos{testFile, 5, 3}, Groups: []RawGroup{tt.group}}})
				require.NoError(t, err)
				fn := res.Function("put")
				require.NotNil(t, fn)
				assert.Equal(t, tt.want, key.get(fn.Server.Set))
				assert.False(t, key.get(fn.Client.Set))
				v, ok := res.Lookup("put", SideServer, key.name)
				require.True(t, ok)
				assert.Equal(t, tt.value, v.Value)
			})
		}
	}
}

// TestResolveBorrowArgs: borrow_args is server-side only, so written in a
// shared group it reaches the server's set and leaves the client's alone.
func TestResolveBorrowArgs(t *testing.T) {
	tests := []struct {
		name  string
		group RawGroup
		want  bool
		value string
	}{
		{"shared group", grp(RawShared, 5, id(5, 9, "borrow_args", "on")), true, "on"},
		{"s_hint, alias spelling", grp(RawServer, 5, id(5, 11, "borrow_args", "yes")), true, "on"},
		{"explicit off", grp(RawServer, 5, id(5, 11, "borrow_args", "off")), false, "off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Resolve("S", nil, []RawFunction{{Name: "put", Pos: Pos{testFile, 5, 3}, Groups: []RawGroup{tt.group}}})
			require.NoError(t, err)
			fn := res.Function("put")
			require.NotNil(t, fn)
			assert.Equal(t, tt.want, fn.Server.Set.BorrowArgs)
			assert.False(t, fn.Client.Set.BorrowArgs)
			v, ok := res.Lookup("put", SideServer, "borrow_args")
			require.True(t, ok)
			assert.Equal(t, tt.value, v.Value)
			assert.False(t, res.Server.Set.BorrowArgs, "the service level is untouched")
		})
	}
}

// TestResolveRetryHints: idempotent and retries are client-side only, so
// written in a shared group they reach the client's set alone; retries=0
// is kept apart from "default" so RetryBudget can tell them apart.
func TestResolveRetryHints(t *testing.T) {
	tests := []struct {
		name   string
		groups []RawGroup
		want   Set
		budget int
		values map[string]string
	}{
		{"idempotent with retries", []RawGroup{grp(RawClient, 5, id(5, 11, "idempotent", "true"), num(5, 30, "retries", "3"))},
			Set{Idempotent: true, Retries: 3}, 3, map[string]string{"idempotent": "on", "retries": "3"}},
		{"idempotent, default retries", []RawGroup{grp(RawShared, 5, id(5, 9, "idempotent", "on"))},
			Set{Idempotent: true}, DefaultRetries, map[string]string{"idempotent": "on", "retries": "2"}},
		{"retries=0 disables them", []RawGroup{grp(RawClient, 5, id(5, 11, "idempotent", "yes"), num(5, 30, "retries", "0"))},
			Set{Idempotent: true, Retries: NoRetries}, 0, map[string]string{"idempotent": "on", "retries": "0"}},
		{"retries without idempotent never retry", []RawGroup{grp(RawClient, 5, num(5, 11, "retries", "4"))},
			Set{Retries: 4}, 0, map[string]string{"idempotent": "off", "retries": "4"}},
		{"hedge", []RawGroup{grp(RawClient, 5, id(5, 11, "idempotent", "on"), ent(5, 30, "hedge", "10ms", ValueSize))},
			Set{Idempotent: true, Hedge: 10 * time.Millisecond}, DefaultRetries, map[string]string{"idempotent": "on", "hedge": "10ms"}},
		{"hedge none", []RawGroup{grp(RawClient, 5, id(5, 11, "hedge", "none"))},
			Set{}, 0, map[string]string{"hedge": "none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Resolve("S", nil, []RawFunction{{Name: "get", Pos: Pos{testFile, 5, 3}, Groups: tt.groups}})
			require.NoError(t, err)
			fn := res.Function("get")
			require.NotNil(t, fn)
			assert.Equal(t, tt.want, fn.Client.Set)
			assert.Equal(t, tt.budget, fn.Client.Set.RetryBudget())
			assert.Equal(t, Set{}, fn.Server.Set, "client-side keys leave the server alone")
			for k, v := range tt.values {
				got, ok := res.Lookup("get", SideClient, k)
				require.True(t, ok, k)
				assert.Equal(t, v, got.Value, k)
			}
		})
	}
}

func TestResolveValuesCoverSchema(t *testing.T) {
	res := precedenceService(t)
	for _, r := range []*Resolved{&res.Client, &res.Server, &res.Functions[0].Client, &res.Functions[2].Server} {
		keys := Keys()
		require.GreaterOrEqual(t, len(r.Values), len(keys))
		for i, k := range keys {
			v := r.Values[i]
			assert.Equal(t, k.Name, v.Key)
			assert.False(t, v.App)
			if v.Origin.IsDefault() {
				assert.Equal(t, k.Default, v.Value, k.Name)
				assert.Empty(t, v.Raw)
			}
		}
		for _, v := range r.Values[len(keys):] {
			assert.True(t, v.App)
		}
	}
}

func TestResolveServiceTable(t *testing.T) {
	res := precedenceService(t)
	svc := res.Service()
	assert.Equal(t, "KV", svc.Name)
	require.Len(t, svc.Functions, 3)
	assert.True(t, svc.Server.Equal(res.Server.Set))
	for i, f := range res.Functions {
		got := svc.Function(f.Name)
		require.NotNil(t, got)
		assert.Same(t, &svc.Functions[i], got)
		assert.True(t, got.Client.Equal(f.Client.Set), f.Name)
		assert.True(t, got.Server.Equal(f.Server.Set), f.Name)
	}
	assert.Equal(t, `hints.Set{PerfGoal: hints.Throughput, Concurrency: 64, Polling: hints.PollEvent, App: map[string]string{"kv.sync": "nosync"}}`,
		GoLiteral(svc.Function("plain").Server))
}

func TestResolveOneSidedKeysInSharedGroup(t *testing.T) {
	res, err := Resolve("S", []RawGroup{
		grp(RawShared, 1, num(1, 9, "rfp_retries", "3"), ent(1, 25, "batch_timeout", "1ms", ValueSize)),
	}, []RawFunction{{Name: "f"}})
	require.NoError(t, err)
	f := res.Function("f")
	assert.Equal(t, 3, f.Client.Set.RFPRetries)
	assert.Equal(t, time.Millisecond, f.Client.Set.BatchTimeout)
	assert.Zero(t, f.Server.Set.RFPRetries, "client-only key does not reach the server")
	v, ok := res.Lookup("f", SideServer, "rfp_retries")
	require.True(t, ok)
	assert.True(t, v.Origin.IsDefault())
	assert.Equal(t, "5", v.Value)
}

func TestResolveTypedValues(t *testing.T) {
	res, err := Resolve("S", []RawGroup{
		grp(RawShared, 1,
			ent(1, 1, "payload_size", "4KB", ValueSize),
			id(1, 2, "proto", "direct_write_imm"),
			id(1, 3, "transport", "shm"),
			num(1, 4, "numa", "1"),
			ent(1, 5, "rfp_fetch_size", "1KiB", ValueSize),
			id(1, 6, "batch", "auto"),
			ent(1, 7, "batch_bytes", "4KiB", ValueSize),
			num(1, 8, "batch_alpha", "0.1"),
			ent(1, 9, "latency_limit", "50us", ValueSize),
			num(1, 10, "inline_threshold", "0"),
			ent(1, 11, "eager_threshold", "8KB", ValueSize),
			num(1, 12, "signal_interval", "16"),
			id(1, 13, "qp_sharing", "on"),
			num(1, 14, "credits", "8"),
			ent(1, 15, "timeout", "2ms", ValueSize),
			ent(1, 16, "app.name", "a b", ValueString),
		),
	}, nil)
	require.NoError(t, err)
	want := Set{PayloadSize: 4096, Protocol: ProtoDirectWriteIMM, Transport: TransportSHM, NUMA: NUMANode(1),
		RFPFetchSize: 1024, Batch: BatchAuto, BatchBytes: 4096, BatchAlpha: 0.1, LatencyLimit: 50 * time.Microsecond,
		InlineThreshold: InlineDisabled, EagerThreshold: 8192, SignalInterval: 16, QPSharing: SwitchOn, Credits: 8,
		Timeout: 2 * time.Millisecond, App: map[string]string{"app.name": "a b"}}
	assert.Equal(t, want, res.Client.Set)
	v, _ := res.Client.Lookup("payload_size")
	assert.Equal(t, "4KiB", v.Value)
	assert.Equal(t, "4KB", v.Raw)
	v, _ = res.Client.Lookup("latency_limit")
	assert.Equal(t, "50us", v.Value)
	want.RFPFetchSize, want.Batch, want.BatchBytes, want.BatchAlpha, want.LatencyLimit = 0, 0, 0, 0, 0
	assert.Equal(t, want, res.Server.Set, "client-only keys stay on the client")
}

func TestResolveErrors(t *testing.T) {
	f := func(name string, groups ...RawGroup) []RawFunction {
		return []RawFunction{{Name: name, Groups: groups, Pos: Pos{testFile, 9, 3}}}
	}
	tests := []struct {
		name  string
		svc   []RawGroup
		funcs []RawFunction
		want  []string
		kinds []error
	}{
		{"unknown key with suggestion", []RawGroup{grp(RawShared, 1, id(1, 9, "perf_gaol", "latency"))}, nil,
			[]string{`svc.thrift:1:9: unknown hint "perf_gaol" (did you mean "perf_goal"?)`}, []error{ErrUnknownKey}},
		{"unknown key without suggestion", []RawGroup{grp(RawShared, 1, id(1, 9, "sync", "nosync"))}, nil,
			[]string{`svc.thrift:1:9: unknown hint "sync" (application hints need a dotted prefix, e.g. "app.sync")`}, []error{ErrUnknownKey}},
		{"malformed dotted key", []RawGroup{grp(RawShared, 1, id(1, 9, "kv..sync", "x"))}, nil,
			[]string{`svc.thrift:1:9: unknown hint "kv..sync" (application hints need a dotted prefix, e.g. "app.kv..sync")`}, []error{ErrUnknownKey}},
		{"bad enum", []RawGroup{grp(RawShared, 1, id(1, 9, "perf_goal", "fast"))}, nil,
			[]string{`svc.thrift:1:19: bad value "fast" for perf_goal: want one of latency, throughput, res_util`}, []error{ErrBadValue}},
		{"bad enum via alias", []RawGroup{grp(RawShared, 1, id(1, 9, "proto", "udp"))}, nil,
			[]string{`svc.thrift:1:15: bad value "udp" for proto: want one of auto, eager, write_rndv, read_rndv, direct_write_send, chained_write_send, direct_write_imm, rfp, hybrid`}, []error{ErrBadValue}},
		{"bad polling", []RawGroup{grp(RawServer, 1, id(1, 9, "perf_pref", "spinning"))}, nil,
			[]string{`svc.thrift:1:19: bad value "spinning" for perf_pref: want one of auto, busy, event, adaptive`}, []error{ErrBadValue}},
		{"bad transport", []RawGroup{grp(RawShared, 1, id(1, 9, "transport", "udp"))}, nil,
			[]string{`svc.thrift:1:19: bad value "udp" for transport: want one of auto, rdma, shm, tcp`}, []error{ErrBadValue}},
		{"bad switch", []RawGroup{grp(RawShared, 1, id(1, 9, "qp_sharing", "maybe"))}, nil,
			[]string{`svc.thrift:1:20: bad value "maybe" for qp_sharing: want one of auto, on, off`}, []error{ErrBadValue}},
		{"bad never_blocks", []RawGroup{grp(RawServer, 1, id(1, 9, "never_blocks", "mostly"))}, nil,
			[]string{`svc.thrift:1:22: bad value "mostly" for never_blocks: want one of off, on`}, []error{ErrBadValue}},
		{"never_blocks on the client", []RawGroup{grp(RawClient, 1, id(1, 9, "never_blocks", "on"))}, nil,
			[]string{`svc.thrift:1:9: hint "never_blocks" is not allowed in c_hint: it is server-side only`}, []error{ErrSide}},
		{"bad int", []RawGroup{grp(RawShared, 1, num(1, 9, "concurrency", "1.5"))}, nil,
			[]string{`svc.thrift:1:21: bad value "1.5" for concurrency: want an integer`}, []error{ErrBadValue}},
		{"zero int", []RawGroup{grp(RawShared, 1, num(1, 9, "concurrency", "0"))}, nil,
			[]string{`svc.thrift:1:21: bad value "0" for concurrency: must be at least 1`}, []error{ErrRange}},
		{"negative int", []RawGroup{grp(RawShared, 1, num(1, 9, "credits", "-4"))}, nil,
			[]string{`svc.thrift:1:17: bad value "-4" for credits: must be at least 1`}, []error{ErrRange}},
		{"int too large", []RawGroup{grp(RawShared, 1, num(1, 9, "rfp_retries", "100000"))}, nil,
			[]string{`svc.thrift:1:21: bad value "100000" for rfp_retries: must be at most 65536`}, []error{ErrRange}},
		{"bad size", []RawGroup{grp(RawShared, 1, ent(1, 9, "payload_size", "4XB", ValueSize))}, nil,
			[]string{`svc.thrift:1:22: bad value "4XB" for payload_size: want a size like 512, 4KB, 4KiB, 1MB`}, []error{ErrBadValue}},
		{"zero size", []RawGroup{grp(RawShared, 1, num(1, 9, "payload_size", "0"))}, nil,
			[]string{`svc.thrift:1:22: bad value "0" for payload_size: must be at least 1`}, []error{ErrRange}},
		{"negative size", []RawGroup{grp(RawShared, 1, num(1, 9, "eager_threshold", "-1"))}, nil,
			[]string{`svc.thrift:1:25: bad value "-1" for eager_threshold: must not be negative`}, []error{ErrRange}},
		{"bad duration", []RawGroup{grp(RawShared, 1, num(1, 9, "timeout", "100"))}, nil,
			[]string{`svc.thrift:1:17: bad value "100" for timeout: want a duration like 50us, 2ms, 1s`}, []error{ErrBadValue}},
		{"zero duration", []RawGroup{grp(RawShared, 1, ent(1, 9, "timeout", "0ms", ValueSize))}, nil,
			[]string{`svc.thrift:1:17: bad value "0ms" for timeout: must be positive`}, []error{ErrRange}},
		{"negative duration", []RawGroup{grp(RawShared, 1, ent(1, 9, "latency_limit", "-5ms", ValueSize))}, nil,
			[]string{`svc.thrift:1:23: bad value "-5ms" for latency_limit: must not be negative`}, []error{ErrRange}},
		{"bad fraction", []RawGroup{grp(RawShared, 1, num(1, 9, "batch_alpha", "2"))}, nil,
			[]string{`svc.thrift:1:21: bad value "2" for batch_alpha: must be between 0 and 1 (exclusive)`}, []error{ErrRange}},
		{"bad numa", []RawGroup{grp(RawShared, 1, id(1, 9, "numa", "gpu"))}, nil,
			[]string{`svc.thrift:1:14: bad value "gpu" for numa: want a node id, nic or none`}, []error{ErrBadValue}},
		{"bad batch", []RawGroup{grp(RawClient, 1, num(1, 9, "batch", "0"))}, nil,
			[]string{`svc.thrift:1:15: bad value "0" for batch: must be at least 1`}, []error{ErrRange}},
		{"service-only key on a function", nil, f("get", grp(RawShared, 9, id(9, 20, "numa", "nic"))),
			[]string{`svc.thrift:9:20: hint "numa" is not allowed on function get: it is service-level only`}, []error{ErrScope}},
		{"bad borrow_args", []RawGroup{grp(RawServer, 1, id(1, 9, "borrow_args", "maybe"))}, nil,
			[]string{`svc.thrift:1:21: bad value "maybe" for borrow_args: want one of off, on`}, []error{ErrBadValue}},
		{"server-only key in c_hint", []RawGroup{grp(RawClient, 1, id(1, 9, "borrow_args", "on"))}, nil,
			[]string{`svc.thrift:1:9: hint "borrow_args" is not allowed in c_hint: it is server-side only`}, []error{ErrSide}},
		{"bad borrow_ctx", []RawGroup{grp(RawServer, 1, id(1, 9, "borrow_ctx", "maybe"))}, nil,
			[]string{`svc.thrift:1:20: bad value "maybe" for borrow_ctx: want one of off, on`}, []error{ErrBadValue}},
		{"borrow_ctx in c_hint", []RawGroup{grp(RawClient, 1, id(1, 9, "borrow_ctx", "on"))}, nil,
			[]string{`svc.thrift:1:9: hint "borrow_ctx" is not allowed in c_hint: it is server-side only`}, []error{ErrSide}},
		{"bad idempotent", []RawGroup{grp(RawClient, 1, id(1, 9, "idempotent", "maybe"))}, nil,
			[]string{`svc.thrift:1:20: bad value "maybe" for idempotent: want one of off, on`}, []error{ErrBadValue}},
		{"idempotent in s_hint", []RawGroup{grp(RawServer, 1, id(1, 9, "idempotent", "true"))}, nil,
			[]string{`svc.thrift:1:9: hint "idempotent" is not allowed in s_hint: it is client-side only`}, []error{ErrSide}},
		{"negative retries", []RawGroup{grp(RawClient, 1, num(1, 9, "retries", "-1"))}, nil,
			[]string{`svc.thrift:1:17: bad value "-1" for retries: must be at least 0`}, []error{ErrRange}},
		{"too many retries", []RawGroup{grp(RawClient, 1, num(1, 9, "retries", "11"))}, nil,
			[]string{`svc.thrift:1:17: bad value "11" for retries: must be at most 10`}, []error{ErrRange}},
		{"retries not a number", []RawGroup{grp(RawClient, 1, id(1, 9, "retries", "many"))}, nil,
			[]string{`svc.thrift:1:17: bad value "many" for retries: want an integer`}, []error{ErrBadValue}},
		{"hedge in s_hint", []RawGroup{grp(RawServer, 1, ent(1, 9, "hedge", "10ms", ValueSize))}, nil,
			[]string{`svc.thrift:1:9: hint "hedge" is not allowed in s_hint: it is client-side only`}, []error{ErrSide}},
		{"hedge not a duration", []RawGroup{grp(RawClient, 1, id(1, 9, "hedge", "soon"))}, nil,
			[]string{`svc.thrift:1:15: bad value "soon" for hedge: want a duration like 50us, 2ms, 1s`}, []error{ErrBadValue}},
		{"zero hedge", []RawGroup{grp(RawClient, 1, ent(1, 9, "hedge", "0ms", ValueSize))}, nil,
			[]string{`svc.thrift:1:15: bad value "0ms" for hedge: must be positive`}, []error{ErrRange}},
		{"client-only key in s_hint", []RawGroup{grp(RawServer, 1, num(1, 9, "rfp_retries", "3"))}, nil,
			[]string{`svc.thrift:1:9: hint "rfp_retries" is not allowed in s_hint: it is client-side only`}, []error{ErrSide}},
		{"duplicate key", []RawGroup{grp(RawShared, 1, id(1, 9, "proto", "eager"), id(1, 25, "proto", "eager"))}, nil,
			[]string{`svc.thrift:1:25: duplicate hint proto=eager (already set at svc.thrift:1:9)`}, []error{ErrDuplicate}},
		{"duplicate via alias and spelling", []RawGroup{grp(RawShared, 1, ent(1, 9, "payload_size", "4KB", ValueSize)), grp(RawShared, 2, num(2, 9, "payload_size", "4096"))}, nil,
			[]string{`svc.thrift:2:9: duplicate hint payload_size=4096 (already set at svc.thrift:1:9)`}, []error{ErrDuplicate}},
		{"alias conflict", []RawGroup{grp(RawShared, 1, id(1, 9, "proto", "eager"), id(1, 25, "protocol", "rfp"))}, nil,
			[]string{`svc.thrift:1:25: conflicting values for protocol: protocol=rfp here, proto=eager at svc.thrift:1:9`}, []error{ErrConflict}},
		{"conflict across groups of one level", nil, f("get", grp(RawClient, 9, id(9, 20, "polling", "busy")), grp(RawClient, 10, id(10, 20, "perf_pref", "event"))),
			[]string{`svc.thrift:10:20: conflicting values for polling: perf_pref=event here, polling=busy at svc.thrift:9:20`}, []error{ErrConflict}},
		{"app key conflict", []RawGroup{grp(RawShared, 1, id(1, 9, "kv.sync", "a"), id(1, 20, "kv.sync", "b"))}, nil,
			[]string{`svc.thrift:1:20: conflicting values for kv.sync: kv.sync=b here, kv.sync=a at svc.thrift:1:9`}, []error{ErrConflict}},
		{"string values are quoted", []RawGroup{grp(RawShared, 1, ent(1, 9, "kv.msg", "a b", ValueString), ent(1, 20, "kv.msg", "a\nb", ValueString))}, nil,
			[]string{`svc.thrift:1:20: conflicting values for kv.msg: kv.msg="a\nb" here, kv.msg="a b" at svc.thrift:1:9`}, []error{ErrConflict}},
		{"invalid group side", []RawGroup{{Side: RawSide(7), Pos: Pos{testFile, 1, 3}}}, nil,
			[]string{`svc.thrift:1:3: invalid hint group side 7`}, []error{ErrSide}},
		{"all problems are reported", []RawGroup{
			grp(RawShared, 1, id(1, 9, "perf_goal", "fast"), id(1, 30, "bogus", "1")),
			grp(RawServer, 2, id(2, 9, "batch", "auto")),
		}, f("get", grp(RawShared, 9, num(9, 20, "credits", "4"), num(9, 40, "concurrency", "0"))),
			[]string{
				`svc.thrift:1:19: bad value "fast" for perf_goal: want one of latency, throughput, res_util`,
				`svc.thrift:1:30: unknown hint "bogus" (application hints need a dotted prefix, e.g. "app.bogus")`,
				`svc.thrift:2:9: hint "batch" is not allowed in s_hint: it is client-side only`,
				`svc.thrift:9:20: hint "credits" is not allowed on function get: it is service-level only`,
				`svc.thrift:9:52: bad value "0" for concurrency: must be at least 1`,
			}, []error{ErrBadValue, ErrUnknownKey, ErrSide, ErrScope, ErrRange}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Resolve("S", tt.svc, tt.funcs)
			require.Error(t, err)
			require.NotNil(t, res, "the valid part is still resolved")
			var list Errors
			require.True(t, errors.As(err, &list))
			got := make([]string, len(list))
			for i, e := range list {
				got[i] = e.Error()
			}
			assert.Equal(t, tt.want, got)
			for i, kind := range tt.kinds {
				assert.ErrorIs(t, list[i], kind)
				assert.ErrorIs(t, err, kind, "the list matches its elements' kinds")
			}
			var one *Error
			require.True(t, errors.As(err, &one))
			assert.Equal(t, tt.want[0], one.Error())
		})
	}
}

func TestResolveConflictKeepsFirst(t *testing.T) {
	res, err := Resolve("S", []RawGroup{grp(RawShared, 1, id(1, 9, "proto", "eager"), id(1, 25, "protocol", "rfp"))}, nil)
	require.ErrorIs(t, err, ErrConflict)
	assert.Equal(t, ProtoEager, res.Client.Set.Protocol)
	assert.Equal(t, "svc.thrift:1:9: x\nsvc.thrift:1:10: y", Errors{
		{Pos: Pos{testFile, 1, 9}, Msg: "x"}, {Pos: Pos{testFile, 1, 10}, Msg: "y"}}.Error())
}

// A function can reset a service-level value to the default by writing
// the default's spelling, including the word defaults auto and none.
func TestResolveResetToDefault(t *testing.T) {
	res, err := Resolve("S", []RawGroup{
		grp(RawShared, 1, num(1, 1, "payload_size", "1024"), ent(1, 2, "timeout", "2ms", ValueSize), id(1, 3, "proto", "rfp"), num(1, 4, "credits", "8")),
	}, []RawFunction{{Name: "f", Groups: []RawGroup{
		grp(RawShared, 2, id(2, 1, "payload_size", "auto"), id(2, 2, "timeout", "none"), id(2, 3, "proto", "auto")),
	}}})
	require.NoError(t, err)
	assert.Equal(t, Set{PayloadSize: 1024, Timeout: 2 * time.Millisecond, Protocol: ProtoRFP, Credits: 8}, res.Server.Set)
	f := res.Function("f")
	assert.Equal(t, Set{Credits: 8}, f.Server.Set)
	v, _ := f.Server.Lookup("timeout")
	assert.Equal(t, "none", v.Value)
	assert.Equal(t, LevelFunctionShared, v.Origin.Level)
	assert.Equal(t, "svc.thrift:2:2", v.Origin.String())
}

func TestResolveSameKeyDifferentLevelsIsFine(t *testing.T) {
	_, err := Resolve("S", []RawGroup{
		grp(RawShared, 1, id(1, 9, "proto", "eager")),
		grp(RawClient, 2, id(2, 9, "protocol", "rfp")),
		grp(RawServer, 3, id(3, 9, "protocol", "rfp")),
	}, []RawFunction{{Name: "f", Groups: []RawGroup{grp(RawShared, 4, id(4, 9, "proto", "hybrid"))}}})
	require.NoError(t, err)
}

func TestSuggest(t *testing.T) {
	assert.Equal(t, "perf_goal", suggest("perf_gaol"))
	assert.Equal(t, "proto", suggest("prto"))
	assert.Equal(t, "batch", suggest("batc"))
	assert.Equal(t, "perf_goal", suggest("PERF_GOAL"))
	assert.Equal(t, "", suggest("completely_different"))
	assert.Equal(t, "", suggest(string(make([]byte, 100))))
}
