// Command rocescope analyzes RoCEv2 and InfiniBand traffic copied off a
// switch mirror port or replayed from capture files, and writes per-window
// flow reports.
//
// Run "rocescope help" for the commands and "rocescope CMD --help" for each
// command's flags and examples.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
)

// command is one subcommand.
type command struct {
	name    string
	args    string // argument synopsis after the flags
	summary string // one line for "rocescope help"
	about   string // what it does, for "rocescope CMD --help"
	example string
	flags   func(fs *pflag.FlagSet) runner
}

// runner runs a command with its positional arguments once its flags are
// parsed.
type runner func(ctx context.Context, env *env, args []string) error

// env is what a command talks to: standard streams, for tests.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func commands() []*command {
	return []*command{replayCommand(), captureCommand(), mergeCommand(), dumpCommand(), genCommand(), versionCommand()}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	code := run(ctx, &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// stopSignals are the signals that end a run the way Ctrl-C does, with the
// open windows reported: SIGINT, SIGTERM and SIGHUP (a closed terminal or
// SSH session), but not SIGHUP when the process started with it ignored
// (nohup, or a service manager that asks for it), which signal.Notify
// would undo.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// run runs the command line args and returns the exit status: 0 on
// success, 1 when the work failed, 2 when the command line is wrong, 130
// when interrupted.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		help(e.stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		if len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				fs, _ := c.flagSet()
				c.usage(e.stdout, fs)
				return 0
			}
			fmt.Fprintf(e.stderr, "rocescope: no command %q (commands: %s)\n", args[1], names())
			return 2
		}
		help(e.stdout)
		return 0
	case "-v", "--version":
		name = "version"
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(e.stderr, "rocescope: unknown command %q (commands: %s; see rocescope help)\n", name, names())
		return 2
	}
	fs, runFn := c.flagSet()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			c.usage(e.stdout, fs)
			return 0
		}
		fmt.Fprintf(e.stderr, "rocescope %s: %v (see rocescope %s --help)\n", c.name, err, c.name)
		return 2
	}
	if err := applyConfigFile(fs); err != nil {
		fmt.Fprintf(e.stderr, "rocescope %s: %v\n", c.name, err)
		return 2
	}
	err := runFn(ctx, e, fs.Args())
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "rocescope %s: %v (see rocescope %s --help)\n", c.name, err, c.name)
		return 2
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(e.stderr, "rocescope %s: interrupted\n", c.name)
		return 130
	default:
		// Errors of package capture start with "capture: ", which the
		// command's name already says.
		fmt.Fprintf(e.stderr, "rocescope %s: %s\n", c.name, strings.TrimPrefix(err.Error(), c.name+": "))
		return 1
	}
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func names() string {
	s := ""
	for i, c := range commands() {
		if i > 0 {
			s += ", "
		}
		s += c.name
	}
	return s
}

// flagSet returns the command's flag set and its runner.
func (c *command) flagSet() (*pflag.FlagSet, runner) {
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.SortFlags = false
	r := c.flags(fs)
	return fs, r
}

func (c *command) usage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: rocescope %s [flags] %s\n\n%s\n", c.name, c.args, c.about)
	if c.example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.example)
	}
	if u := fs.FlagUsages(); u != "" {
		fmt.Fprintf(w, "\nFlags:\n%s", u)
	}
}

func help(w io.Writer) {
	fmt.Fprint(w, `rocescope: a passive analyzer for RoCEv2 and InfiniBand traffic.

It reads frames from capture files or a live mirror port, decodes the
InfiniBand transport headers, and writes per-window reports: how many QP
flows there are, which are the elephants and which swing in rate, the RDMA
operation mix, congestion (CNP, ECN-CE, FECN/BECN, PFC) and transport
trouble (NAK, RNR NAK, retransmissions, PSN gaps), and latency at the mirror.

Usage: rocescope COMMAND [flags] [args]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Start here:
  rocescope gen -o /tmp/demo.pcap      # make a synthetic RoCE trace
  rocescope replay /tmp/demo.pcap      # report on it, one window per second

Run "rocescope COMMAND --help" for a command's flags and examples.
`)
}
