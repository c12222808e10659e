package html_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export/html"
	"github.com/rocescope/rocescope/metrics/report"
)

// A File is the sink of `--format html`: it takes the report of every
// window and writes the page when it is flushed, at the end of the run.
func ExampleFile() {
	dir, err := os.MkdirTemp("", "rocescope-html")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "report.html")

	sink, err := html.NewFile(path, &html.Options{Inputs: []string{"trace.pcap"}, ElephantRate: 1e9, JitterRate: 1e9})
	if err != nil {
		panic(err)
	}
	for i := range int64(3) {
		w := &metrics.Window{Start: (1_700_000_000 + i) * 1e9, Length: 1e9, Hosts: []string{"cap1"}}
		w.Counters[metrics.Packets] = uint64(1000 * (i + 1))
		if err := sink.Write(&report.Report{Window: w}); err != nil {
			panic(err)
		}
	}
	if err := sink.Flush(); err != nil {
		panic(err)
	}

	page, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	fmt.Println(bytes.HasPrefix(page, []byte("<!DOCTYPE html>")))
	fmt.Println(bytes.Contains(page, []byte(`"packets":[1000,2000,3000]`)))
	// Output:
	// true
	// true
}
