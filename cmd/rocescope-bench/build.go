package main

import (
	"debug/buildinfo"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// buildsLine names the profile each contestant's rocescope was built with,
// since a profile-guided build (cmd/rocescope/default.pgo) runs faster
// than the same source built without one: name is the binary's name in
// the table, path the binary.
func buildsLine(names, paths []string) string {
	parts := make([]string, len(names))
	for i, path := range paths {
		how := "an unreadable build"
		if bi, err := buildinfo.ReadFile(path); err == nil {
			how = profileOf(bi)
		}
		parts[i] = fmt.Sprintf("%s %s", names[i], how)
	}
	return "builds: " + strings.Join(parts, "; ")
}

// profileOf says which profile the build bi used (its -pgo setting,
// named by the file), or that it used none.
func profileOf(bi *debug.BuildInfo) string {
	for _, s := range bi.Settings {
		if s.Key == "-pgo" && s.Value != "" {
			return "with the profile " + filepath.Base(s.Value)
		}
	}
	return "without a profile"
}
