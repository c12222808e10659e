package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/state"
	"github.com/rocescope/rocescope/metrics/state/kafka"
)

// kafkaInput reads window states from a Kafka topic as a member of a
// consumer group.
type kafkaInput struct {
	c           *kafka.Consumer
	e           *env
	follow      bool
	poll        time.Duration
	lastTrouble string // the last trouble said, to say it once
}

var _ stateInput = (*kafkaInput)(nil)

// runKafka merges the states of the topic url names, decoding them with
// opts.
func (m *merger) runKafka(ctx context.Context, url, group string, opts *state.ReadOptions, follow bool, poll time.Duration) error {
	t, err := kafka.ParseURL(url)
	if err != nil {
		return usagef("%v", err)
	}
	c, err := kafka.NewConsumer(t, group, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	err = m.run(ctx, &kafkaInput{c: c, e: m.e, follow: follow, poll: poll})
	if n := c.Stats().Skipped; n > 0 {
		fmt.Fprintf(m.e.stderr, "rocescope merge: %s: %d states skipped: their windows were reported already (read again after a restart or rebalance, or late)\n", url, n)
	}
	return err
}

// Read polls the topic for at most the poll interval. When the partitions
// of this merger change, it forgets the pending windows, whose states come
// again. Without follow it returns inputEnd once it has read every record
// the topic held, and fails on trouble with the brokers; with follow, it
// never ends, says once what trouble it meets and keeps trying, and when
// ctx is done it returns how far it got, so that the windows not complete
// stay for the next run.
func (in *kafkaInput) Read(ctx context.Context, m *merger) (inputState, error) {
	pctx, cancel := context.WithTimeout(ctx, in.poll)
	defer cancel()
	b, err := in.c.Poll(pctx, m.spare)
	if err != nil {
		return 0, err
	}
	if err := in.trouble(b.Err); err != nil {
		return 0, err
	}
	if b.Reset {
		m.restart()
	}
	for _, s := range b.States {
		if err := m.add(s.Source, s.Window); err != nil {
			return 0, err
		}
	}
	switch {
	case !b.CaughtUp:
		return inputBehind, nil
	case !in.follow:
		return inputEnd, nil
	}
	return inputCurrent, nil
}

// commitTimeout bounds an offset commit, so that a merge whose brokers went
// away still ends.
const commitTimeout = 30 * time.Second

// Reported commits the topic's offsets past the windows reported. With
// follow, a commit that fails is said and left to the next one, which
// covers it.
func (in *kafkaInput) Reported(ctx context.Context, start int64) error {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	return in.trouble(in.c.Commit(ctx, start))
}

// trouble returns err without follow. With follow it writes err once, and
// that the trouble is over once err is nil again, and returns nil.
func (in *kafkaInput) trouble(err error) error {
	switch {
	case !in.follow:
		return err
	case err == nil && in.lastTrouble != "":
		fmt.Fprintf(in.e.stderr, "rocescope merge: kafka: reading again\n")
		in.lastTrouble = ""
	case err != nil && err.Error() != in.lastTrouble:
		fmt.Fprintf(in.e.stderr, "rocescope merge: %v (trying again)\n", err)
		in.lastTrouble = err.Error()
	}
	return nil
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
