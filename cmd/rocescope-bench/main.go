// Command rocescope-bench measures rocescope's replay rate against its
// baselines in one run, on the same traces, each contestant in its own
// process reading from the page cache: a bare walk over the pcap records
// (the floor: reading alone), tshark decoding the traces (fields output,
// the usual tool), and with --baseline rocescope built from another commit.
// It builds rocescope, generates 128-byte-snap traces with "rocescope gen"
// for each number of connections and each trace shape (frames over a span
// of 1 s windows: by default 2 M frames over 4 windows, where the cost of a
// cold start shows, and 12 M over 12, the steady state), runs the
// contestants in rounds, one run of each per round so that a machine's
// changing load falls on all alike, and prints per trace the median of
// each: its rate, its CPU time per frame (user and system, from
// getrusage), its ratio to the walk's rate, the ratio of its CPU per frame
// to the baseline's, the ratio of its rate to one worker's (for more
// workers), its peak resident memory, its minor page faults and the
// round trip of a cache line between CPUs 0 and 1 measured right before
// each run (coreRoundTrip). The two ratios are of runs of the same round,
// so that the load of a moment and the drift of the machine fall on both
// sides alike: the median of the rounds' ratios, and in brackets the
// lowest and highest, which say how far a figure near a target can be
// trusted. Replays with several workers, whose reader hands every event
// to another core, get a line of their own with their ratios split by that
// round trip: a VM's host may run its two vCPUs on cores that share a
// cache one minute and on cores that do not the next (byPlacement). A
// contestant's own messages (its standard error) are shown only when it
// fails. Before the table it
// names the machine (machine), the first-touch cost of a page measured in
// its own process as each rocescope run measures it in its own.
//
// Each run starts --settle after the last ended. On a VM whose balloon
// driver reports freed pages to the host (virtio-balloon free page
// reporting), a process that starts right after another one exits reuses
// memory the host still backs, while one that starts seconds later pays
// the host's first touch of every page again: on an AMD EPYC VM of
// docs/MEASUREMENTS.md, a 1 M-connection replay took 0.2-0.3 s of system time
// right after another and 1.0-1.2 s four seconds later, runs alternating
// between the two when started back to back. Settling gives every run the
// second case, the one a capture host sees.
//
// With --pgo-out it measures nothing: it replays each trace with each
// worker count once, with rocescope built without a profile and its
// --cpu-profile, and writes the merged profile that the profile-guided
// build of cmd/rocescope reads (default.pgo).
//
// Run it from the repository root (the default traces take about 7 GB in
// --dir and most of an hour):
//
//	go run ./cmd/rocescope-bench
//	go run ./cmd/rocescope-bench --conns 100000 --traces 2000000/4s --runs 5 --baseline ac4ba8c
//	go run ./cmd/rocescope-bench --traces 12000000/12s --pgo-out cmd/rocescope/default.pgo
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
)

// walkCommand is the argument that makes this program walk a trace itself,
// so that the floor runs in its own process like the others.
const walkCommand = "walk-records"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if len(os.Args) == 3 && os.Args[1] == walkCommand {
		err = walk(ctx, os.Args[2])
	} else {
		err = run(ctx, os.Args[1:])
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rocescope-bench:", err)
		os.Exit(1)
	}
}

// walk reads every record of the trace with the capture file reader and
// touches nothing else: the cost of reading alone. It prints the frames.
func walk(ctx context.Context, path string) error {
	src, err := file.Open([]string{path}, nil)
	if err != nil {
		return err
	}
	defer src.Close()
	var n uint64
	err = capture.Each(ctx, src, capture.NewBatch(256), func(b *capture.Batch) error {
		n += uint64(len(b.Frames))
		return nil
	})
	fmt.Println(n)
	return err
}

// result is one run of a contestant.
type result struct {
	elapsed time.Duration
	cpu     time.Duration // user and system
	maxRSS  int64         // bytes
	faults  int64         // minor page faults
	c2c     time.Duration // core-to-core round trip right before the run (coreRoundTrip)
}

// contestant is a command measured on a trace.
type contestant struct {
	name string
	args []string // command and arguments; the trace is appended
	runs int
	base int // index of the contestant its CPU per frame is compared with, -1 for none
	one  int // index of the same binary with one worker, whose rate its rate is compared with, -1 for none
}

// shape is the shape of a generated trace: frames over a span of time.
type shape struct {
	frames int
	span   time.Duration
}

// parseShapes parses FRAMES/SPAN,...; a FRAMES alone spans the
// generator's default time.
func parseShapes(s string) ([]shape, error) {
	var shapes []shape
	for _, f := range strings.Split(s, ",") {
		n, span, _ := strings.Cut(f, "/")
		frames, err := strconv.Atoi(n)
		if err != nil || frames <= 0 {
			return nil, fmt.Errorf("--traces: %q: frames must be a positive number", f)
		}
		var d time.Duration
		if span != "" {
			if d, err = time.ParseDuration(span); err != nil || d <= 0 {
				return nil, fmt.Errorf("--traces: %q: the span must be a positive duration such as 4s", f)
			}
		}
		shapes = append(shapes, shape{frames, d})
	}
	return shapes, nil
}

func run(ctx context.Context, args []string) error {
	fs := pflag.NewFlagSet("rocescope-bench", pflag.ContinueOnError)
	conns := fs.IntSlice("conns", []int{10_000, 100_000, 1_000_000}, "RC connections of the traces")
	traces := fs.String("traces", "2000000/4s,12000000/12s", "shapes of the traces, FRAMES/SPAN,...: frames over a span of 1 s windows")
	workers := fs.IntSlice("workers", []int{1, 2}, "worker counts of the replays")
	snap := fs.Int("snaplen", 128, "cut frames to this many bytes (0: whole frames)")
	runs := fs.Int("runs", 5, "rounds: runs of each contestant; the median counts")
	baseline := fs.String("baseline", "", "also replay with rocescope built from this commit (built in a temporary worktree) and print the ratio of CPU per frame to it")
	dir := fs.String("dir", filepath.Join(os.TempDir(), "rocescope-bench"), "where the binaries and traces go (kept between runs)")
	tsharkMax := fs.Int("tshark-frames", 2_000_000, "run tshark (once) on traces of at most this many frames; 0: never")
	settle := fs.Duration("settle", 4*time.Second, "pause before each run, so that the memory the last run freed has gone back to a VM's host (see the package doc)")
	pgoOut := fs.String("pgo-out", "", "instead of the table, replay each trace once per worker count with rocescope built without a profile, with --cpu-profile, and write the merged profile to this file (cmd/rocescope/default.pgo: see the README)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	shapes, err := parseShapes(*traces)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(*dir, "rocescope")
	build := []string{"build", "-o", bin}
	if *pgoOut != "" {
		// The profile is of the code as written, not as the last
		// profile optimized it.
		build = append(build, "-pgo=off")
	}
	if err := command(ctx, "go", append(build, "./cmd/rocescope")...).Run(); err != nil {
		return fmt.Errorf("build rocescope (run from the repository root): %w", err)
	}
	if *pgoOut != "" {
		var traces []string
		for _, c := range *conns {
			for _, sh := range shapes {
				trace := traceFile(*dir, sh, c, *snap)
				if err := generate(ctx, bin, trace, sh, c, *snap); err != nil {
					return err
				}
				traces = append(traces, trace)
			}
		}
		return writeProfile(ctx, bin, traces, *workers, *pgoOut)
	}
	var baseBin string
	if *baseline != "" {
		if baseBin, err = buildAt(ctx, *baseline, *dir); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	_, err = exec.LookPath("tshark")
	haveTshark := err == nil
	host, _ := os.Hostname()
	fmt.Printf("rocescope-bench on %s: %s/%s, %d CPUs, %s; traces of %d-byte frames in %s; median of %d rounds, runs %v apart\n",
		host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), *snap, *dir, *runs, *settle)
	fmt.Println(machine())
	names, paths := []string{"rocescope"}, []string{bin}
	if baseBin != "" {
		names, paths = append(names, *baseline), append(paths, baseBin)
	}
	fmt.Printf("%s\n\n", buildsLine(names, paths))
	// Fixed columns rather than a tabwriter: each trace's rows are printed
	// as soon as they are measured, and still line up with the others.
	const row = "%8v %9v %6v %26v %7v %13v %8v %20v %20v %13v %12v %8v\n"
	fmt.Printf(row, "conns", "frames", "span", "contestant", "Mpps", "CPU ns/frame", "vs walk", "CPU vs base", "rate vs 1 worker", "peak RSS MiB", "minor faults", "c2c ns")
	for _, c := range *conns {
		for _, sh := range shapes {
			n := sh.frames
			trace := traceFile(*dir, sh, c, *snap)
			if err := generate(ctx, bin, trace, sh, c, *snap); err != nil {
				return err
			}
			list := []contestant{{name: "bare walk", args: []string{self, walkCommand}, runs: *runs, base: -1, one: -1}}
			replay := func(bin string, w int) []string {
				return []string{bin, "replay", "--workers", strconv.Itoa(w), "--format", "jsonl", "-o", os.DevNull, "--progress=false"}
			}
			// The contestants replaying with one worker, ours and the
			// baseline's.
			one := [2]int{-1, -1}
			for _, w := range *workers {
				bins := []string{bin}
				if baseBin != "" {
					bins = append(bins, baseBin)
				}
				for k, b := range bins {
					ct := contestant{name: fmt.Sprintf("replay, %d worker(s)", w), runs: *runs, args: replay(b, w), base: -1, one: -1}
					switch {
					case k == 1:
						ct.name = fmt.Sprintf("%s, %d worker(s)", *baseline, w)
					case baseBin != "":
						ct.base = len(list) + 1
					}
					if w == 1 {
						one[k] = len(list)
					} else {
						ct.one = one[k]
					}
					list = append(list, ct)
				}
			}
			if haveTshark && n <= *tsharkMax {
				list = append(list, contestant{name: "tshark -T fields", runs: 1, base: -1, one: -1,
					args: []string{"tshark", "-n", "--disable-protocol", "rpcordma", "-T", "fields", "-e", "infiniband.bth.opcode", "-r"}})
			}
			all, err := rounds(ctx, list, trace, *settle)
			if err != nil {
				return err
			}
			rate := func(r result) float64 { return float64(n) / r.elapsed.Seconds() }
			perFrame := func(r result) float64 { return float64(r.cpu.Nanoseconds()) / float64(n) }
			rateRatio := func(a, b result) float64 { return rate(a) / rate(b) }
			cpuRatio := func(a, b result) float64 { return perFrame(a) / perFrame(b) }
			results := medians(all)
			for i, ct := range list {
				r := results[i]
				vsBase, vsOne := "-", "-"
				if ct.base >= 0 {
					vsBase = paired(all[i], all[ct.base], cpuRatio)
				}
				if ct.one >= 0 {
					vsOne = paired(all[i], all[ct.one], rateRatio)
				}
				fmt.Printf(row, c, n, sh.span, ct.name, fmt.Sprintf("%.2f", rate(r)/1e6), fmt.Sprintf("%.0f", perFrame(r)),
					fmt.Sprintf("%.3f", rate(r)/rate(results[0])), vsBase, vsOne, fmt.Sprintf("%.0f", float64(r.maxRSS)/(1<<20)), r.faults, r.c2c.Nanoseconds())
			}
			// Several workers hand events from core to core: their
			// figures, by where the CPUs were.
			for i, ct := range list {
				if ct.one < 0 {
					continue
				}
				line := "rate vs 1 worker " + byPlacement(all[i], all[ct.one], rateRatio)
				if ct.base >= 0 {
					line += "; CPU vs base " + byPlacement(all[i], all[ct.base], cpuRatio)
				}
				fmt.Printf("%8v %9v %6v %26v   by core-to-core round trip: %s\n", "", "", "", ct.name, line)
			}
		}
	}
	return nil
}

// buildAt builds rocescope from commit rev of the repository in the working
// directory, in a temporary worktree, into dir, and returns the binary.
func buildAt(ctx context.Context, rev, dir string) (string, error) {
	tree, err := os.MkdirTemp("", "rocescope-bench-baseline-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tree)
	if err := command(ctx, "git", "worktree", "add", "--detach", tree, rev).Run(); err != nil {
		return "", fmt.Errorf("--baseline %s: git worktree add: %w", rev, err)
	}
	defer command(context.Background(), "git", "worktree", "remove", "--force", tree).Run()
	bin, err := filepath.Abs(filepath.Join(dir, "rocescope-"+strings.ReplaceAll(rev, "/", "_")))
	if err != nil {
		return "", err
	}
	build := command(ctx, "go", "build", "-o", bin, "./cmd/rocescope")
	build.Dir = tree
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("--baseline %s: build: %w", rev, err)
	}
	return bin, nil
}

// traceFile names the trace of shape sh with conns connections and frames
// cut to snap bytes, in dir.
func traceFile(dir string, sh shape, conns, snap int) string {
	return filepath.Join(dir, fmt.Sprintf("gen-%d-%d-%v-%d.pcap", sh.frames, conns, sh.span, snap))
}

// writeProfile replays each trace once with each worker count, writing a
// CPU profile of each run (rocescope's --cpu-profile), and merges them into
// the profile-guided build's profile at out.
func writeProfile(ctx context.Context, bin string, traces []string, workers []int, out string) error {
	tmp, err := os.MkdirTemp("", "rocescope-bench-pgo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var profiles []string
	for _, trace := range traces {
		for _, w := range workers {
			p := filepath.Join(tmp, fmt.Sprintf("%d-%d.pprof", len(profiles), w))
			replay := command(ctx, bin, "replay", "--workers", strconv.Itoa(w), "--format", "jsonl", "-o", os.DevNull,
				"--progress=false", "--cpu-profile", p, trace)
			if err := replay.Run(); err != nil {
				return fmt.Errorf("replay %s: %w", trace, err)
			}
			profiles = append(profiles, p)
		}
	}
	merged, err := command(ctx, "go", append([]string{"tool", "pprof", "-proto"}, profiles...)...).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof: %w", err)
	}
	if err := os.WriteFile(out, merged, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d bytes) from %d replays\n", out, len(merged), len(profiles))
	return nil
}

// generate writes the trace unless it is there already.
func generate(ctx context.Context, bin, trace string, sh shape, conns, snap int) error {
	if _, err := os.Stat(trace); err == nil {
		return nil
	}
	fmt.Fprintf(os.Stderr, "generating %s\n", trace)
	tmp := trace + ".tmp"
	args := []string{"gen", "-o", tmp, "--packets", strconv.Itoa(sh.frames), "--flows", strconv.Itoa(conns),
		"--snaplen", strconv.Itoa(snap), "--seed", "1"}
	if sh.span > 0 {
		args = append(args, "--duration", sh.span.String())
	}
	gen := command(ctx, bin, args...)
	if err := gen.Run(); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	return os.Rename(tmp, trace)
}

// rounds runs the contestants on trace in rounds, one run of each per
// round (each ct.runs times in all), each settle after the last, and
// returns the runs of each, in round order.
func rounds(ctx context.Context, list []contestant, trace string, settle time.Duration) ([][]result, error) {
	all := make([][]result, len(list))
	for round := 0; ; round++ {
		ran := false
		for i, ct := range list {
			if round >= max(ct.runs, 1) {
				continue
			}
			select {
			case <-time.After(settle):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			c2c := coreRoundTrip(c2cPasses)
			r, err := timed(ctx, append(slices.Clone(ct.args), trace))
			if err != nil {
				return nil, err
			}
			r.c2c = c2c
			all[i] = append(all[i], r)
			ran = true
		}
		if !ran {
			return all, nil
		}
	}
}

// medians returns the median run of each contestant's runs: its CPU time,
// wall time, peak memory and faults are the medians of theirs.
func medians(all [][]result) []result {
	med := make([]result, len(all))
	for i, rs := range all {
		m := func(f func(result) int64) int64 {
			v := make([]int64, len(rs))
			for k, r := range rs {
				v[k] = f(r)
			}
			return median(v)
		}
		med[i] = result{elapsed: time.Duration(m(func(r result) int64 { return int64(r.elapsed) })),
			cpu:    time.Duration(m(func(r result) int64 { return int64(r.cpu) })),
			maxRSS: m(func(r result) int64 { return r.maxRSS }), faults: m(func(r result) int64 { return r.faults }),
			c2c: time.Duration(m(func(r result) int64 { return int64(r.c2c) }))}
	}
	return med
}

// c2cPasses is how many times coreRoundTrip passes the word each way
// before each run: 1-7 ms on the AMD EPYC VMs of docs/MEASUREMENTS.md.
const c2cPasses = 20_000

// nearFar is the core-to-core round trip that tells the runs whose two CPUs
// shared a last-level cache from those whose did not: on the KVM VM of
// 2026-11-30 (docs/MEASUREMENTS.md), 50-100 ns against 328-372 ns.
const nearFar = 150 * time.Nanosecond

// byPlacement returns paired's figure over the rounds in which both runs
// found the CPUs near each other (a core-to-core round trip under
// nearFar), and over those in which both found them far, with the number
// of rounds of each: "near (3) 1.780x (1.75-1.80), far (2) 1.450x
// (1.40-1.50)".
func byPlacement(a, b []result, ratio func(a, b result) float64) string {
	var near, far [2][]result
	for k := range min(len(a), len(b)) {
		switch x, y := a[k].c2c, b[k].c2c; {
		case x < nearFar && y < nearFar:
			near[0], near[1] = append(near[0], a[k]), append(near[1], b[k])
		case x >= nearFar && y >= nearFar:
			far[0], far[1] = append(far[0], a[k]), append(far[1], b[k])
		}
	}
	return fmt.Sprintf("near (%d) %s, far (%d) %s", len(near[0]), paired(near[0], near[1], ratio), len(far[0]), paired(far[0], far[1], ratio))
}

// median sorts v, at least one value, and returns its median: the middle
// value, or the mean of the two middle ones.
func median[T int64 | float64](v []T) T {
	slices.Sort(v)
	n := len(v)
	if n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[n/2]
}

// paired returns the median of ratio over the rounds both a and b ran, and
// in brackets its lowest and highest: "0.35x (0.33-0.37)".
func paired(a, b []result, ratio func(a, b result) float64) string {
	n := min(len(a), len(b))
	if n == 0 {
		return "-"
	}
	v := make([]float64, n)
	for k := range n {
		v[k] = ratio(a[k], b[k])
	}
	med := median(v) // sorts v
	if n == 1 {
		return fmt.Sprintf("%.3fx", med)
	}
	return fmt.Sprintf("%.3fx (%.2f-%.2f)", med, v[0], v[n-1])
}

// timed runs a command to completion and returns its wall time, CPU time,
// peak resident set size and minor page faults.
func timed(ctx context.Context, args []string) (result, error) {
	cmd := command(ctx, args[0], args[1:]...)
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	r := result{elapsed: time.Since(start)}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return r, errors.New("no resource usage on this system")
	}
	r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	r.maxRSS = ru.Maxrss * 1024
	r.faults = ru.Minflt
	return r, nil
}

func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = os.Stderr
	return cmd
}
