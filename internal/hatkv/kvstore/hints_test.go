package kvstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptionsFromHints(t *testing.T) {
	tests := []struct {
		name  string
		hints map[string]string
		check func(t *testing.T, c config)
		bad   bool
	}{
		{"paper server", map[string]string{"sync": "nometasync", "writemap": "on", "commit": "group", "concurrency": "128", "mapsize": "32GiB"},
			func(t *testing.T, c config) {
				assert.Equal(t, SyncNoMetaSync, c.sync)
				assert.True(t, c.writeMap)
				assert.Equal(t, CommitGroup, c.commit)
				assert.Equal(t, 128, c.concurrency)
				assert.EqualValues(t, 32<<30, c.mapSize)
			}, false},
		{"group tuning", map[string]string{"group_batch": "32", "group_delay": "200us"},
			func(t *testing.T, c config) {
				assert.Equal(t, 32, c.maxBatch)
				assert.Equal(t, 200*time.Microsecond, c.maxDelay)
			}, false},
		{"plain bytes", map[string]string{"mapsize": "1048576", "writemap": "off"},
			func(t *testing.T, c config) {
				assert.EqualValues(t, 1<<20, c.mapSize)
				assert.False(t, c.writeMap)
			}, false},
		{"unknown hint", map[string]string{"colour": "blue"}, nil, true},
		{"bad sync", map[string]string{"sync": "sometimes"}, nil, true},
		{"bad writemap", map[string]string{"writemap": "maybe"}, nil, true},
		{"bad size", map[string]string{"mapsize": "-3M"}, nil, true},
		{"bad delay", map[string]string{"group_delay": "soon"}, nil, true},
		{"bad concurrency", map[string]string{"concurrency": "many"}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := OptionsFromHints(tc.hints)
			if tc.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			c := defaultConfig()
			for _, o := range opts {
				o(&c)
			}
			tc.check(t, c)
		})
	}
}
