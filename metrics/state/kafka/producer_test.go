package kafka

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/internal/freeport"
	"github.com/rocescope/rocescope/metrics"
)

// lockedBuffer is a bytes.Buffer safe for the producer's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testWindows returns the windows of a small synthetic trace.
func testWindows(t *testing.T) []*metrics.Window {
	t.Helper()
	var ws []*metrics.Window
	for _, enc := range windowStates(t, &synth.Config{Seed: 4, Packets: 20_000, Flows: 300, Duration: 3 * time.Second}) {
		w := new(metrics.Window)
		if err := w.UnmarshalBinary(enc); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if len(ws) != 3 {
		t.Fatalf("%d windows, want 3", len(ws))
	}
	return ws
}

// TestProducerBrokerDown writes states while no broker listens: Write
// must return at once every time, and Close must say that the states were
// not delivered, with a counter and one message per state naming the
// topic and broker.
func TestProducerBrokerDown(t *testing.T) {
	ws := testWindows(t)
	target, err := ParseURL("kafka://127.0.0.1:" + itoa(freeport.Pick(t)) + "/states")
	if err != nil {
		t.Fatal(err)
	}
	var warn lockedBuffer
	p, err := NewProducer(target, &ProducerConfig{Host: "h", DeliveryTimeout: time.Second, CloseTimeout: 5 * time.Second, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		start := time.Now()
		if err := p.Write(w); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 500*time.Millisecond { // half the delivery timeout
			t.Errorf("Write took %v with the broker down", d)
		}
	}
	err = p.Close()
	if !errors.Is(err, ErrUndelivered) || !strings.Contains(err.Error(), "3 of 3 window states not delivered") || !strings.Contains(err.Error(), target.Brokers[0]) {
		t.Errorf("Close: %v, want ErrUndelivered for 3 of 3 states naming the broker", err)
	}
	if st := p.Stats(); st != (ProducerStats{Written: 3, Failed: 3, Records: 3}) {
		t.Errorf("stats %+v, want 3 written, 3 failed", st)
	}
	if n := strings.Count(warn.String(), "not delivered to topic states on "+target.Brokers[0]); n != 3 {
		t.Errorf("%d messages, want 3:\n%s", n, warn.String())
	}
}

// TestProducerBrokerRestart stops the only broker (kfake, with its data in
// a directory) after the first state and starts it again on the same port:
// the states written while it was away must be buffered, not dropped, and
// every state must be in the topic byte for byte once it is back, with the
// headers the package doc lists.
func TestProducerBrokerRestart(t *testing.T) {
	ws := testWindows(t)
	port, data := freeport.Pick(t), t.TempDir()
	start := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(2, "states"), kfake.DataDir(data), kfake.SyncWrites())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	c := start()
	target, err := ParseURL("kafka://127.0.0.1:" + itoa(port) + "/states")
	if err != nil {
		t.Fatal(err)
	}
	var warn lockedBuffer
	p, err := NewProducer(target, &ProducerConfig{Host: "cap0", CloseTimeout: 20 * time.Second, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Write(ws[0]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); p.Stats().Delivered < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first state was not delivered: %+v", p.Stats())
		}
	}
	c.Close()
	for _, w := range ws[1:] {
		if err := p.Write(w); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the producer meets the closed port
	start()
	if err := p.Close(); err != nil {
		t.Fatalf("%v\n%s", err, warn.String())
	}
	if st := p.Stats(); st != (ProducerStats{Written: 3, Delivered: 3, Records: 3}) {
		t.Errorf("stats %+v, want 3 written and delivered", st)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(target.Brokers...), kgo.ConsumeTopics("states"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(got) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	if len(got) != 3 {
		t.Fatalf("%d records after the restart, want 3", len(got))
	}
	seen := map[int]bool{}
	for _, r := range got {
		h, err := readHeaders(r)
		if err != nil {
			t.Fatal(err)
		}
		i := slicesIndex(ws, h.start)
		if i < 0 || seen[i] {
			t.Fatalf("record of window %d: not one of the 3 windows, or twice", h.start)
		}
		seen[i] = true
		want, _ := ws[i].AppendBinary(nil)
		if !bytes.Equal(r.Value, want) || h != (headers{host: "cap0", start: ws[i].Start, length: ws[i].Length, i: 1, n: 1}) {
			t.Errorf("window %d: record of %d bytes with headers %+v, want the state's %d bytes", i, len(r.Value), h, len(want))
		}
	}
}

// slicesIndex returns the index of the window that starts at start, or -1.
func slicesIndex(ws []*metrics.Window, start int64) int {
	for i, w := range ws {
		if w.Start == start {
			return i
		}
	}
	return -1
}

func itoa(n int) string { return strconv.Itoa(n) }
