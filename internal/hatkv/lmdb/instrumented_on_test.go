//go:build asan || race

package lmdb

// Under -asan or -race the runtime keeps shadow memory and quarantines
// freed blocks, so RSS is a weak leak signal; the RSS bound is relaxed
// and, under -asan, LeakSanitizer (run by the Go runtime at exit) checks.
const instrumentedBuild = true
