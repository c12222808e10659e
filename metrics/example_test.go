package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
)

// Example runs a synthetic RoCE trace through the engine and prints a few
// keys of each window's JSON line.
func Example() {
	src, err := synth.New(&synth.Config{Seed: 1, Packets: 20000, Flows: 50, Duration: 2 * time.Second})
	if err != nil {
		panic(err)
	}
	cfg := &metrics.Config{Host: "example", Workers: 1}
	e, err := metrics.New(cfg)
	if err != nil {
		panic(err)
	}
	rp, err := report.NewReporter(cfg)
	if err != nil {
		panic(err)
	}
	err = e.Run(context.Background(), []capture.Source{src}, func(w *metrics.Window) error {
		var line struct {
			Packets uint64 `json:"packets"`
			RoCE    uint64 `json:"roce_packets"`
			Flows   uint64 `json:"flows"`
			Partial bool   `json:"partial"`
		}
		if err := json.Unmarshal(export.AppendJSON(nil, rp.Build(w)), &line); err != nil {
			return err
		}
		fmt.Printf("packets %d, RoCE %d, flows %d, partial %v\n", line.Packets, line.RoCE, line.Flows, line.Partial)
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// packets 10000, RoCE 9784, flows 100, partial true
	// packets 10000, RoCE 9800, flows 100, partial true
}
