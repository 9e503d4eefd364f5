// Package buildinfo tells the commands' --version what they were built from.
package buildinfo

import "runtime/debug"

// Version is the version of the module the running command was built
// from, as the go command stamped it: a tag or pseudo-version, or, when a
// replace directive pointed that module at a local checkout (no version
// of its own), "devel (PATH)". "devel" alone means no version was
// recorded (`go run` in a checkout with -buildvcs=false, a test binary).
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromModule(info.Main)
}

func fromModule(m debug.Module) string {
	if r := m.Replace; r != nil {
		if r.Version != "" && r.Version != "(devel)" {
			return r.Version
		}
		return "devel (" + r.Path + ")"
	}
	if m.Version == "" || m.Version == "(devel)" {
		return "devel"
	}
	return m.Version
}
