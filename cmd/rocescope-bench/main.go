// Command rocescope-bench measures rocescope's replay rate against two
// baselines in one run, on the same traces, each contestant in its own
// process reading from the page cache: a bare walk over the pcap records
// (the floor: reading alone), and tshark decoding the traces (fields
// output, the usual tool). It builds rocescope, generates 128-byte-snap
// traces with "rocescope gen" for each number of connections and frames,
// runs each contestant several times and prints, per trace, the median run
// of each: its rate, its CPU time per frame (user and system), its ratios to
// the walk and to tshark, its peak resident memory and its page faults.
//
// Run it from the repository root (the default traces take about 3.5 GB in
// --dir and a quarter of an hour):
//
//	go run ./cmd/rocescope-bench
//	go run ./cmd/rocescope-bench --conns 100000 --frames 2000000 --runs 5
package main

import (
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
	faults  int64         // minor and major page faults
}

// contestant is a command measured on a trace.
type contestant struct {
	name string
	args []string // command and arguments; the trace is appended
	runs int
}

func run(ctx context.Context, args []string) error {
	fs := pflag.NewFlagSet("rocescope-bench", pflag.ContinueOnError)
	conns := fs.IntSlice("conns", []int{10_000, 100_000, 1_000_000}, "RC connections of the traces")
	frames := fs.IntSlice("frames", []int{2_000_000, 8_000_000}, "frames of the traces")
	workers := fs.IntSlice("workers", []int{1, 2}, "worker counts of the replays")
	snap := fs.Int("snaplen", 128, "cut frames to this many bytes (0: whole frames)")
	runs := fs.Int("runs", 3, "runs of each contestant; the median counts")
	dir := fs.String("dir", filepath.Join(os.TempDir(), "rocescope-bench"), "where the binaries and traces go (kept between runs)")
	tsharkMax := fs.Int("tshark-frames", 2_000_000, "run tshark (once) on traces of at most this many frames; 0: never")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(*dir, "rocescope")
	if err := command(ctx, "go", "build", "-o", bin, "./cmd/rocescope").Run(); err != nil {
		return fmt.Errorf("build rocescope (run from the repository root): %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	_, err = exec.LookPath("tshark")
	haveTshark := err == nil
	host, _ := os.Hostname()
	fmt.Printf("rocescope-bench on %s: %s/%s, %d CPUs, %s; traces of %d-byte frames in %s; median of %d runs\n\n",
		host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), *snap, *dir, *runs)
	// Fixed columns rather than a tabwriter: each trace's rows are printed
	// as soon as they are measured, and still line up with the others.
	const row = "%8v %9v %20v %7v %13v %8v %10v %13v %12v\n"
	fmt.Printf(row, "conns", "frames", "contestant", "Mpps", "CPU ns/frame", "vs walk", "vs tshark", "peak RSS MiB", "page faults")
	for _, c := range *conns {
		for _, n := range *frames {
			trace := filepath.Join(*dir, fmt.Sprintf("gen-%d-%d-%d.pcap", n, c, *snap))
			if err := generate(ctx, bin, trace, n, c, *snap); err != nil {
				return err
			}
			list := []contestant{{name: "bare walk", args: []string{self, walkCommand}, runs: *runs}}
			for _, w := range *workers {
				list = append(list, contestant{name: fmt.Sprintf("replay, %d worker(s)", w), runs: *runs,
					args: []string{bin, "replay", "--workers", strconv.Itoa(w), "--format", "jsonl", "-o", os.DevNull, "--progress=false"}})
			}
			if haveTshark && n <= *tsharkMax {
				list = append(list, contestant{name: "tshark -T fields", runs: 1,
					args: []string{"tshark", "-n", "--disable-protocol", "rpcordma", "-T", "fields", "-e", "infiniband.bth.opcode", "-r"}})
			}
			results := make([]result, len(list))
			for i, ct := range list {
				if results[i], err = median(ctx, ct, trace); err != nil {
					return err
				}
			}
			rate := func(r result) float64 { return float64(n) / r.elapsed.Seconds() }
			for i, ct := range list {
				r := results[i]
				vsT := "-"
				if last := list[len(list)-1]; last.name == "tshark -T fields" && i != len(list)-1 {
					vsT = fmt.Sprintf("%.0fx", rate(r)/rate(results[len(list)-1]))
				}
				fmt.Printf(row, c, n, ct.name, fmt.Sprintf("%.2f", rate(r)/1e6), fmt.Sprintf("%.0f", float64(r.cpu.Nanoseconds())/float64(n)),
					fmt.Sprintf("%.2f", rate(r)/rate(results[0])), vsT, fmt.Sprintf("%.0f", float64(r.maxRSS)/(1<<20)), r.faults)
			}
		}
	}
	return nil
}

// generate writes the trace unless it is there already.
func generate(ctx context.Context, bin, trace string, frames, conns, snap int) error {
	if _, err := os.Stat(trace); err == nil {
		return nil
	}
	fmt.Fprintf(os.Stderr, "generating %s\n", trace)
	tmp := trace + ".tmp"
	gen := command(ctx, bin, "gen", "-o", tmp, "--packets", strconv.Itoa(frames), "--flows", strconv.Itoa(conns),
		"--snaplen", strconv.Itoa(snap), "--seed", "1")
	if err := gen.Run(); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	return os.Rename(tmp, trace)
}

// median runs ct on trace ct.runs times and returns the run of median wall
// time.
func median(ctx context.Context, ct contestant, trace string) (result, error) {
	var rs []result
	for range max(ct.runs, 1) {
		r, err := timed(ctx, append(slices.Clone(ct.args), trace))
		if err != nil {
			return r, err
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b result) int { return int(a.elapsed - b.elapsed) })
	return rs[len(rs)/2], nil
}

// timed runs a command to completion and returns its wall time, CPU time,
// peak resident set size and page faults.
func timed(ctx context.Context, args []string) (result, error) {
	cmd := command(ctx, args[0], args[1:]...)
	cmd.Stdout = io.Discard
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s: %w", args[0], err)
	}
	r := result{elapsed: time.Since(start)}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return r, errors.New("no resource usage on this system")
	}
	r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	r.maxRSS = ru.Maxrss * 1024
	r.faults = ru.Minflt + ru.Majflt
	return r, nil
}

func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = os.Stderr
	return cmd
}
