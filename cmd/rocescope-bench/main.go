// Command rocescope-bench measures rocescope's replay rate against two
// baselines in one run, on one trace, from the page cache: a bare walk over
// the pcap records (the floor: reading alone), and tshark decoding the same
// trace (fields output, the usual tool). It builds rocescope, generates the
// trace with "rocescope gen", times each contestant several times and prints
// the best run of each with its rate and its ratios to the others.
//
// Run it from the repository root:
//
//	go run ./cmd/rocescope-bench                  # 1 M packets, 1 and all-CPU workers
//	go run ./cmd/rocescope-bench --packets 10000000 --flows 1000000 --no-tshark
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
)

// result is the best run of one contestant.
type result struct {
	name    string
	elapsed time.Duration
	frames  uint64
	maxRSS  int64 // bytes, 0 when not measured
}

func (r result) pps() float64 { return float64(r.frames) / r.elapsed.Seconds() }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rocescope-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := pflag.NewFlagSet("rocescope-bench", pflag.ContinueOnError)
	packets := fs.Int("packets", 1000000, "packets in the generated trace")
	flows := fs.Int("flows", 10000, "RC connections in the trace")
	snap := fs.Int("snaplen", 0, "cut frames to this many bytes (0: whole frames)")
	runs := fs.Int("runs", 3, "runs of each contestant; the best counts")
	workers := fs.Int("workers", runtime.NumCPU(), "workers of the parallel replay")
	dir := fs.String("dir", filepath.Join(os.TempDir(), "rocescope-bench"), "where the binary and trace go (kept between runs)")
	noTshark := fs.Bool("no-tshark", false, "skip tshark")
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
	trace := filepath.Join(*dir, fmt.Sprintf("bench-%d-%d-%d.pcap", *packets, *flows, *snap))
	if _, err := os.Stat(trace); err != nil {
		fmt.Fprintf(os.Stderr, "generating %s\n", trace)
		gen := command(ctx, bin, "gen", "-o", trace, "--packets", fmt.Sprint(*packets), "--flows", fmt.Sprint(*flows),
			"--snaplen", fmt.Sprint(*snap), "--seed", "1")
		if err := gen.Run(); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
	}
	st, err := os.Stat(trace)
	if err != nil {
		return err
	}

	walk, err := best(*runs, func() (result, error) { return bareWalk(trace) })
	if err != nil {
		return err
	}
	walk.name = "bare pcap walk (floor)"
	results := []result{walk}
	for _, w := range uniq(1, *workers) {
		r, err := best(*runs, func() (result, error) {
			return timed(ctx, walk.frames, bin, "replay", "--workers", fmt.Sprint(w), "--format", "jsonl", "-o", os.DevNull, "--progress=false", trace)
		})
		if err != nil {
			return err
		}
		r.name = fmt.Sprintf("rocescope replay, %d worker(s)", w)
		results = append(results, r)
	}
	if !*noTshark {
		if _, err := exec.LookPath("tshark"); err != nil {
			fmt.Fprintln(os.Stderr, "tshark not found: skipped")
		} else {
			r, err := timed(ctx, walk.frames, "tshark", "-n", "-r", trace, "--disable-protocol", "rpcordma",
				"-T", "fields", "-e", "infiniband.bth.opcode")
			if err != nil {
				return err
			}
			r.name = "tshark -T fields (decode only), 1 run"
			results = append(results, r)
		}
	}

	fmt.Printf("trace: %s, %d frames, %.1f MiB, snap length %d; %s, %d CPUs\n\n",
		trace, walk.frames, float64(st.Size())/(1<<20), *snap, runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU())
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contestant\tseconds\tMpps\tvs floor\tvs tshark\tmax RSS MiB\t")
	tshark := results[len(results)-1]
	for _, r := range results {
		vsT := "-"
		if !*noTshark && tshark.name != r.name && tshark.frames > 0 {
			vsT = fmt.Sprintf("%.1fx", r.pps()/tshark.pps())
		}
		rss := "-"
		if r.maxRSS > 0 {
			rss = fmt.Sprintf("%.0f", float64(r.maxRSS)/(1<<20))
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.2f\t%.2fx\t%s\t%s\t\n", r.name, r.elapsed.Seconds(), r.pps()/1e6, r.pps()/walk.pps(), vsT, rss)
	}
	return tw.Flush()
}

// uniq returns 1 and n, once each.
func uniq(one, n int) []int {
	if n == one {
		return []int{one}
	}
	return []int{one, n}
}

// best runs f n times and returns the fastest run.
func best(n int, f func() (result, error)) (result, error) {
	var b result
	for i := range n {
		r, err := f()
		if err != nil {
			return r, err
		}
		if i == 0 || r.elapsed < b.elapsed {
			b = r
		}
	}
	return b, nil
}

// bareWalk reads every record of the trace with the capture file reader
// and touches nothing else: the cost of reading alone.
func bareWalk(path string) (result, error) {
	start := time.Now()
	src, err := file.Open([]string{path}, nil)
	if err != nil {
		return result{}, err
	}
	defer src.Close()
	var n uint64
	err = capture.Each(context.Background(), src, capture.NewBatch(256), func(b *capture.Batch) error {
		n += uint64(len(b.Frames))
		return nil
	})
	return result{elapsed: time.Since(start), frames: n}, err
}

// timed runs a command to completion and returns its wall time and peak
// resident set size; frames is what it processed.
func timed(ctx context.Context, frames uint64, name string, args ...string) (result, error) {
	cmd := command(ctx, name, args...)
	cmd.Stdout = io.Discard
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	r := result{elapsed: time.Since(start), frames: frames}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss * 1024
	}
	return r, nil
}

func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = os.Stderr
	return cmd
}
