package hatkv

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/hints"
)

func TestDefaultConfigFollowsIDL(t *testing.T) {
	cfg := DefaultConfig()
	assert.Equal(t, kvstore.SyncAlways, cfg.Sync)
	assert.Equal(t, kvstore.CommitGroup, cfg.Commit)
	assert.False(t, cfg.WriteMap)
	assert.Equal(t, 128, cfg.Concurrency)
	assert.Equal(t, "hint", cfg.Sources["sync"])
}

// TestOnlyGetNeverBlocks: the FLOCK dispatcher runs never_blocks handlers
// itself, so the hint must stay off every function that can wait for a
// commit (Put, Delete, MultiPut) or run long (Scan, MultiGet, Stats).
func TestOnlyGetNeverBlocks(t *testing.T) {
	var got []string
	for _, f := range hatkv.HatKVHints.Functions {
		if f.Server.NeverBlocks {
			got = append(got, f.Name)
		}
	}
	assert.Equal(t, []string{"Get"}, got)
	assert.False(t, hatkv.HatKVHints.Server.NeverBlocks, "service level")
}

func svcWith(service map[string]string, conc int, fn map[string]string) *hints.Service {
	return &hints.Service{
		Name:   "HatKV",
		Server: hints.Set{Concurrency: conc, App: service},
		Functions: []hints.Function{
			{Name: "Get", Server: hints.Set{App: service}},
			{Name: "Put", Server: hints.Set{App: fn}},
		},
	}
}

func TestConfigFromHints(t *testing.T) {
	tests := []struct {
		name    string
		svc     *hints.Service
		want    Config
		wantErr string
	}{
		{
			name: "all store hints",
			svc: svcWith(map[string]string{"kv.sync": "nometasync", "kv.commit": "immediate", "kv.writemap": "on",
				"kv.mapsize": "2GiB", "kv.group_batch": "32", "kv.group_delay": "1ms", "other.key": "ignored"}, 16,
				map[string]string{"kv.sync": "nometasync", "kv.commit": "immediate", "kv.writemap": "on",
					"kv.mapsize": "2GiB", "kv.group_batch": "32", "kv.group_delay": "1ms"}),
			want: Config{Sync: kvstore.SyncNoMetaSync, Commit: kvstore.CommitImmediate, WriteMap: true,
				MapSize: 2 << 30, GroupBatch: 32, GroupDelay: time.Millisecond, Concurrency: 16},
		},
		{
			name: "no hints: LMDB defaults, one reader",
			svc:  svcWith(nil, 0, nil),
			want: Config{Sync: kvstore.SyncAlways, Commit: kvstore.CommitImmediate, Concurrency: 1},
		},
		{
			name:    "function-level store hint differs",
			svc:     svcWith(map[string]string{"kv.sync": "always"}, 8, map[string]string{"kv.sync": "nosync"}),
			wantErr: "kv.sync=nosync on function Put differs from the service level",
		},
		{
			name:    "bad sync value",
			svc:     svcWith(map[string]string{"kv.sync": "sometimes"}, 8, map[string]string{"kv.sync": "sometimes"}),
			wantErr: "kv.sync=sometimes",
		},
		{
			name:    "map size too small",
			svc:     svcWith(map[string]string{"kv.mapsize": "4KB"}, 8, map[string]string{"kv.mapsize": "4KB"}),
			wantErr: "at least 1MiB",
		},
		{
			name:    "unknown kv key",
			svc:     svcWith(map[string]string{"kv.colour": "blue"}, 8, map[string]string{"kv.colour": "blue"}),
			wantErr: "unknown setting",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConfigFromHints(tt.svc)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrConfig)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			got.Sources, got.groupCommit = nil, false
			assert.Equal(t, tt.want, got)
			assert.NotEmpty(t, got.Options())
		})
	}
}

func TestAutoCommitFollowsPlan(t *testing.T) {
	tests := []struct {
		name      string
		set       hints.Set
		wantGroup bool
	}{
		{"defaults: latency, one caller", hints.Set{}, false},
		{"latency, under-subscribed", hints.Set{PerfGoal: hints.Latency, Concurrency: 1}, false},
		{"throughput", hints.Set{PerfGoal: hints.Throughput, Concurrency: 1}, true},
		{"latency, over-subscribed", hints.Set{PerfGoal: hints.Latency, Concurrency: 1 << 20}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &hints.Service{Name: "HatKV", Server: tt.set}
			cfg, err := ConfigFromHints(svc)
			require.NoError(t, err)
			want := kvstore.CommitImmediate
			if tt.wantGroup {
				want = kvstore.CommitGroup
			}
			assert.Equal(t, want, cfg.Commit, "no kv.commit hint means auto")
			require.NoError(t, cfg.Set("commit", "immediate", "flag"))
			require.NoError(t, cfg.Set("commit", "auto", "flag"))
			assert.Equal(t, want, cfg.Commit, "commit=auto from the command line")
		})
	}
}

func TestConfigOverride(t *testing.T) {
	cfg := DefaultConfig()
	require.NoError(t, cfg.Set("sync", "nosync", "flag"))
	require.NoError(t, cfg.Set("concurrency", "7", "flag"))
	assert.Equal(t, kvstore.SyncNoSync, cfg.Sync)
	assert.Equal(t, 7, cfg.Concurrency)
	assert.Equal(t, "flag", cfg.Sources["sync"])
	assert.Equal(t, "sync=nosync(flag) commit=group writemap=false mapsize=default max_readers=7(flag)", cfg.String())
	require.ErrorIs(t, cfg.Set("concurrency", "0", "flag"), ErrConfig)
	require.ErrorIs(t, cfg.Set("writemap", "maybe", "flag"), ErrConfig)
}

func TestMapError(t *testing.T) {
	limit := &kvstore.LimitError{Err: kvstore.ErrKeyTooLong, What: "key length", Got: 600, Max: 511}
	tests := []struct {
		name  string
		err   error
		check func(t *testing.T, got error)
	}{
		{"nil", nil, func(t *testing.T, got error) { require.NoError(t, got) }},
		{"not found", kvstore.ErrNotFound, func(t *testing.T, got error) {
			var nf *hatkv.NotFound
			require.ErrorAs(t, got, &nf)
			assert.Equal(t, "k", nf.Key)
			assert.Equal(t, `key "k" not found`, nf.Message)
		}},
		{"limit", limit, func(t *testing.T, got error) {
			var bad *hatkv.InvalidArgument
			require.ErrorAs(t, got, &bad)
			assert.Equal(t, "key too long: key length is 600, limit 511", bad.Message)
		}},
		{"full", fmt.Errorf("%w (map size 1048576 bytes)", kvstore.ErrStoreFull), func(t *testing.T, got error) {
			var full *hatkv.StoreFull
			require.ErrorAs(t, got, &full)
			assert.Contains(t, full.Message, "store is full (map size 1048576 bytes)")
		}},
		{"disk full", fmt.Errorf("%w (0 bytes free on the file system holding d): %w", kvstore.ErrDiskFull, syscall.EIO), func(t *testing.T, got error) {
			var full *hatkv.StoreFull
			require.ErrorAs(t, got, &full)
			assert.Equal(t, "store is full: disk full (0 bytes free on the file system holding d): input/output error; reads still work, writes and deletes once space is freed", full.Message)
		}},
		{"closed stays internal", kvstore.ErrClosed, func(t *testing.T, got error) {
			require.ErrorIs(t, got, kvstore.ErrClosed)
		}},
		{"corrupt record stays internal", &kvstore.RecordError{Key: "k", Reason: "truncated"}, func(t *testing.T, got error) {
			require.ErrorIs(t, got, kvstore.ErrCorruptRecord)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, mapError(tt.err, "k")) })
	}
}
