package client

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCallTable checks the table against a map model: seqs that share a
// ring place (they differ by callRing) go to the map, the ring's place is
// reused once freed, and all yields each outstanding call once even while
// its loop takes them.
func TestCallTable(t *testing.T) {
	type op struct {
		put bool
		seq int32
	}
	cases := []struct {
		name string
		ops  []op
	}{
		{"one after another", []op{{true, 1}, {true, 2}, {false, 1}, {true, 3}, {false, 3}, {false, 2}}},
		{"same place", []op{{true, 5}, {true, 5 + callRing}, {true, 5 + 2*callRing}, {false, 5 + callRing}, {false, 5}, {true, 5 + 3*callRing}}},
		{"place freed, map still holds a later seq", []op{{true, 9}, {true, 9 + callRing}, {false, 9}, {true, 9 + 2*callRing}, {false, 9 + callRing}}},
		{"both words of the mask", []op{{true, 63}, {true, 64}, {true, 127}, {true, 128}, {false, 64}}},
		{"take what is not there", []op{{true, 1}, {false, 2}, {false, 1 + callRing}, {false, 1}, {false, 1}}},
		{"wrapped seqids", []op{{true, 0x7fffffff}, {true, 1}, {false, 0x7fffffff}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tab callTable
			model := map[int32]*call{}
			for _, o := range tc.ops {
				if o.put {
					cl := &call{seq: o.seq}
					tab.put(o.seq, cl)
					model[o.seq] = cl
				} else {
					require.Same(t, model[o.seq], tab.take(o.seq), "take %d", o.seq)
					delete(model, o.seq)
				}
				require.Equal(t, len(model), tab.len())
				for seq, cl := range model {
					require.Same(t, cl, tab.get(seq), "get %d", seq)
				}
				got := map[int32]*call{}
				for seq, cl := range tab.all() {
					require.NotContains(t, got, seq)
					require.Equal(t, seq, cl.seq)
					got[seq] = cl
				}
				require.True(t, maps.Equal(model, got), "all: %v, want %v", got, model)
			}
			// all's loop may take every call it is given.
			for seq := range tab.all() {
				require.NotNil(t, tab.take(seq))
			}
			require.Zero(t, tab.len())
			for seq := range model {
				require.Nil(t, tab.get(seq))
			}
		})
	}
}
