//go:build race

package bench

// raceEnabled: the race detector's build empties sync.Pools at random,
// so allocation counts are looser under it.
const raceEnabled = true
