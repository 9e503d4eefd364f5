// Package buildinfo tells the commands' --version what they were built from.
package buildinfo

import "runtime/debug"

// Version is the main module's version as the go command stamped it
// (a tag, or a pseudo-version from the VCS state when built in a
// checkout), or "devel" when there is none (e.g. `go run` without VCS
// information, or a test binary).
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromMain(info.Main.Version)
}

func fromMain(v string) string {
	if v == "" || v == "(devel)" {
		return "devel"
	}
	return v
}
