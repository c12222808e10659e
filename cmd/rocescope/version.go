package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the version",
		about:   "Version prints rocescope's version, the Go version and the platform.",
		flags: func(fs *pflag.FlagSet) runner {
			return func(_ context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("version takes no arguments")
				}
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
				fmt.Fprintf(e.stdout, "rocescope %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return nil
			}
		},
	}
}
