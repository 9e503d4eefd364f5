//go:build !(asan || race)

package lmdb

const instrumentedBuild = false
