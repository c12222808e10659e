package main

import (
	"fmt"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/state"
	"github.com/rocescope/rocescope/metrics/state/kafka"
)

// openConsumer joins the consumer group of cfg to read the topic url
// names.
func openConsumer(url string, cfg *kafka.ConsumerConfig) (*kafka.Consumer, error) {
	t, err := kafka.ParseURL(url)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return kafka.NewConsumer(t, cfg)
}

// reportSkipped says how many records of windows reported already c
// skipped.
func reportSkipped(e *env, url string, c *kafka.Consumer) {
	if n := c.Stats().Reported; n > 0 {
		fmt.Fprintf(e.stderr, "rocescope merge: %s: %d states skipped: their windows were reported already (read again after a restart or rebalance, or late)\n", url, n)
	}
}

// stateOutput is where replay and capture write window states: files
// (state.Writer) or a Kafka topic (kafka.Producer).
type stateOutput interface {
	Write(w *metrics.Window) error
	Close() error
}

var (
	_ stateOutput = (*state.Writer)(nil)
	_ stateOutput = (*kafka.Producer)(nil)
)

// openStateOutput opens the --state-out of cfg's host.
func openStateOutput(e *env, path string, cfg *metrics.Config) (stateOutput, error) {
	if !kafka.IsURL(path) {
		return state.NewWriter(path, cfg)
	}
	t, err := kafka.ParseURL(path)
	if err != nil {
		return nil, usagef("--state-out: %v", err)
	}
	return kafka.NewProducer(t, &kafka.ProducerConfig{Host: cfg.Host, Warn: e.stderr})
}
