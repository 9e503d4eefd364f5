package flock

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAllocateQPs(t *testing.T) {
	tests := []struct {
		name    string
		senders []SenderLoad
		max     int
		want    []int
	}{
		{"proportional", []SenderLoad{{QPs: 8, U: 30}, {QPs: 8, U: 10}}, 8, []int{6, 2}},
		{"dormant keeps one", []SenderLoad{{QPs: 8, U: 0}, {QPs: 8, U: 50}}, 8, []int{1, 7}},
		{"all dormant", []SenderLoad{{QPs: 4}, {QPs: 4}, {QPs: 4}}, 256, []int{1, 1, 1}},
		{"capped by own QPs, rest to others", []SenderLoad{{QPs: 2, U: 90}, {QPs: 16, U: 10}}, 10, []int{2, 8}},
		{"small utilisation still one", []SenderLoad{{QPs: 8, U: 1000}, {QPs: 8, U: 1}}, 8, []int{7, 1}},
		{"more senders than MAX_AQP", []SenderLoad{{QPs: 4, U: 5}, {QPs: 4}, {QPs: 4, U: 1}}, 2, []int{1, 1, 1}},
		{"largest remainder", []SenderLoad{{QPs: 8, U: 1}, {QPs: 8, U: 1}, {QPs: 8, U: 1}}, 8, []int{3, 3, 2}},
		{"no QPs", []SenderLoad{{QPs: 0, U: 4}, {QPs: 4, U: 4}}, 8, []int{0, 4}},
		{"empty", nil, 8, []int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AllocateQPs(tc.senders, tc.max)
			require.Equal(t, tc.want, got)
			sum := 0
			for i, a := range got {
				sum += a
				require.LessOrEqual(t, a, max(tc.senders[i].QPs, 0))
			}
			if len(tc.senders) <= tc.max {
				require.LessOrEqual(t, sum, tc.max)
			}
		})
	}
}

func TestNewSenderShare(t *testing.T) {
	tests := []struct {
		name               string
		functioning        []int
		total, maxAQP, qps int
		want               int
	}{
		{"first sender gets all it has", nil, 0, 256, 8, 8},
		{"average of functioning", []int{6, 2}, 8, 256, 16, 4},
		{"limited by free QPs", []int{10, 10}, 20, 22, 16, 2},
		{"never below one", []int{10}, 10, 10, 4, 1},
		{"limited by own QPs", []int{100}, 100, 256, 3, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, NewSenderShare(tc.functioning, tc.total, tc.maxAQP, tc.qps))
		})
	}
}

func TestAssignCallers(t *testing.T) {
	tests := []struct {
		name    string
		callers []CallerLoad
		active  []int
		want    map[uint32]int
	}{
		{"equal callers spread by quota",
			[]CallerLoad{{ID: 0, MedianSize: 64, Count: 10, Bytes: 640}, {ID: 1, MedianSize: 64, Count: 10, Bytes: 640},
				{ID: 2, MedianSize: 64, Count: 10, Bytes: 640}, {ID: 3, MedianSize: 64, Count: 10, Bytes: 640}},
			[]int{0, 1}, map[uint32]int{0: 0, 1: 0, 2: 1, 3: 1}},
		{"large separated from small",
			[]CallerLoad{{ID: 0, MedianSize: 16384, Count: 10, Bytes: 163840}, {ID: 1, MedianSize: 64, Count: 100, Bytes: 6400},
				{ID: 2, MedianSize: 16384, Count: 10, Bytes: 163840}, {ID: 3, MedianSize: 64, Count: 90, Bytes: 5760}},
			[]int{0, 1, 2}, map[uint32]int{3: 0, 1: 0, 0: 1, 2: 2}},
		{"sorted by size then count",
			[]CallerLoad{{ID: 0, MedianSize: 100, Count: 50, Bytes: 5000}, {ID: 1, MedianSize: 100, Count: 10, Bytes: 5000}},
			[]int{4, 5}, map[uint32]int{1: 4, 0: 5}},
		{"idle keeps active QP, moves off inactive",
			[]CallerLoad{{ID: 0, Current: 1}, {ID: 1, Current: 3}, {ID: 2, Current: 3}},
			[]int{0, 1}, map[uint32]int{0: 1, 1: 0, 2: 1}},
		{"overflow lands on the last QP",
			[]CallerLoad{{ID: 0, MedianSize: 8, Bytes: 80}, {ID: 1, MedianSize: 8, Bytes: 80}, {ID: 2, MedianSize: 8, Bytes: 80}},
			[]int{7}, map[uint32]int{0: 7, 1: 7, 2: 7}},
		{"no active QPs", []CallerLoad{{ID: 0, Bytes: 1}}, nil, map[uint32]int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, AssignCallers(tc.callers, tc.active))
		})
	}
}

func TestMedians(t *testing.T) {
	tests := []struct {
		name string
		hist []uint32
		want int
	}{
		{"empty", []uint32{0, 0, 0}, 0},
		{"single", []uint32{0, 5}, 1},
		{"skewed", []uint32{0, 1, 1, 10}, 3},
		{"odd split", []uint32{0, 2, 1, 2}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, medianHist(tc.hist)) })
	}
	require.Equal(t, 0, medianU32(nil))
	require.Equal(t, 5, medianU32([]uint32{9, 5, 1}))
}
