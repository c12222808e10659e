package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// TestBuildsLine: the line names each build's profile from its -pgo build
// setting, and says so of a test binary, built without one, and of a file
// that is no Go binary.
func TestBuildsLine(t *testing.T) {
	withPGO := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "-compiler", Value: "gc"}, {Key: "-pgo", Value: "/src/rocescope/cmd/rocescope/default.pgo"},
	}}
	if got, want := profileOf(withPGO), "with the profile default.pgo"; got != want {
		t.Errorf("profileOf(-pgo set) = %q, want %q", got, want)
	}
	if got, want := profileOf(&debug.BuildInfo{}), "without a profile"; got != want {
		t.Errorf("profileOf(no -pgo) = %q, want %q", got, want)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, []byte("not a binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := buildsLine([]string{"rocescope", "ac4ba8c"}, []string{self, junk})
	if want := "builds: rocescope without a profile; ac4ba8c an unreadable build"; got != want {
		t.Errorf("buildsLine = %q, want %q", got, want)
	}
}
