package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDriverOrderRotates(t *testing.T) {
	d := Driver{Systems: []string{"a", "b", "c"}}
	tests := []struct {
		rep  int
		want []string
	}{
		{0, []string{"a", "b", "c"}},
		{1, []string{"b", "c", "a"}},
		{2, []string{"c", "a", "b"}},
		{3, []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, d.order(tt.rep), "rep %d", tt.rep)
	}
	// Over a full rotation every system takes every place once.
	seen := map[string]map[int]bool{}
	for rep := range 3 {
		for i, s := range d.order(rep) {
			if seen[s] == nil {
				seen[s] = map[int]bool{}
			}
			seen[s][i] = true
		}
	}
	for s, places := range seen {
		require.Len(t, places, 3, s)
	}
}

func TestDriverSettle(t *testing.T) {
	d := Driver{Settle: 20 * time.Millisecond}
	start := time.Now()
	require.NoError(t, d.settle(context.Background()))
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d.Settle = time.Hour
	require.ErrorIs(t, d.settle(ctx), context.Canceled)

	d.Settle = 0
	require.NoError(t, d.settle(context.Background()))
}

func TestParsePlacements(t *testing.T) {
	tests := []struct {
		names, cpus string
		want        []string
		wantErr     string
	}{
		{names: "unpinned,same-cpu,split-cpu", cpus: "0,1", want: []string{"unpinned", "same-cpu", "split-cpu"}},
		{names: "split-cpu, unpinned", cpus: "2,3", want: []string{"unpinned", "split-cpu"}},
		{names: "same-cpu,bogus", cpus: "0,1", wantErr: `unknown placement "bogus" (unpinned, same-cpu, split-cpu)`},
		{names: "unpinned", cpus: "0,1,2", wantErr: `-cpus "0,1,2": want two different CPU numbers, e.g. 0,1`},
		{names: "unpinned", cpus: ",1", wantErr: `-cpus ",1": want two different CPU numbers, e.g. 0,1`},
		{names: "split-cpu", cpus: "1,1", wantErr: `-cpus "1,1": want two different CPU numbers, e.g. 0,1`},
		{names: "split-cpu", cpus: "0,x", wantErr: `-cpus "0,x": want two different CPU numbers, e.g. 0,1`},
		{names: "split-cpu", cpus: " 2, 3", want: []string{"split-cpu"}},
	}
	for _, tt := range tests {
		t.Run(tt.names+"/"+tt.cpus, func(t *testing.T) {
			ps, err := ParsePlacements(tt.names, tt.cpus)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, p := range ps {
				got = append(got, p.Name)
			}
			require.Equal(t, tt.want, got)
		})
	}
	ps, err := ParsePlacements("split-cpu", "2,3")
	require.NoError(t, err)
	require.Equal(t, Placement{Name: "split-cpu", ServerCPU: "2", ClientCPU: "3"}, ps[0])
}
