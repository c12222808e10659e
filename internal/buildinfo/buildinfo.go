// Package buildinfo says which rocescope is running: its module version
// and VCS revision, as the Go toolchain recorded them in the binary.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version returns the module version ("(devel)" when built from a
// checkout), followed by the first 12 digits of the VCS revision when the
// build recorded one.
func Version() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
	}
	return v
}

// GoVersion returns the version of Go the binary was built with.
func GoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.GoVersion != "" {
		return bi.GoVersion
	}
	return runtime.Version()
}
