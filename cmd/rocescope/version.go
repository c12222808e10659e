package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/internal/buildinfo"
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
				fmt.Fprintf(e.stdout, "rocescope %s %s %s/%s\n", buildinfo.Version(), buildinfo.GoVersion(), runtime.GOOS, runtime.GOARCH)
				return nil
			}
		},
	}
}
