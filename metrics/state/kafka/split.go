package kafka

import (
	"errors"
	"fmt"

	"github.com/rocescope/rocescope/metrics"
)

// ErrTooLarge is wrapped when a state cannot be split into records of the
// allowed size: one sketch, or one flow, is larger than a record may be.
var ErrTooLarge = errors.New("state part larger than a record may be")

// split returns the encodings of windows whose merge is w, each at most
// limit bytes; enc is the encoding of w. A state that fits is returned as
// it is. Otherwise the first part holds the counters, CM messages, pause
// and retransmission records, each sketch goes whole into the first part
// with room for it, and the flows
// (normalized, so sorted by key) are dealt out in runs, each part with
// empty sketches of w's configuration.
func split(w *metrics.Window, enc []byte, limit int) ([][]byte, error) {
	if len(enc) <= limit {
		return [][]byte{enc}, nil
	}
	// A window of w's sketch configuration (which is not exported) with
	// every sketch empty: decoded from w's own state, then emptied.
	blank := new(metrics.Window)
	if err := blank.UnmarshalBinary(enc); err != nil {
		return nil, err
	}
	blank.Counters, blank.CM, blank.Flows, blank.Pauses, blank.Retrans = metrics.Counters{}, nil, nil, nil, nil
	blank.Distinct.Reset()
	blank.FlowBytes.Reset()
	blank.FlowPackets.Reset()
	blank.Top.Reset()
	blank.ReadLatency.Reset()
	blank.AckLatency.Reset()

	var parts [][]byte
	encode := func(p *metrics.Window) ([]byte, error) {
		b, err := p.AppendBinary(nil)
		if err != nil {
			return nil, fmt.Errorf("kafka: split window %d: %w", w.Start, err)
		}
		return b, nil
	}

	// The counters, CM messages, pause and retransmission records and the
	// sketches, packed greedily.
	cur := *blank
	cur.Counters, cur.CM, cur.Pauses, cur.Retrans = w.Counters, w.CM, w.Pauses, w.Retrans
	curEnc, err := encode(&cur)
	if err != nil {
		return nil, err
	}
	for _, s := range sketchFields {
		trial := cur
		s.take(&trial, w)
		b, err := encode(&trial)
		if err != nil {
			return nil, err
		}
		if len(b) <= limit {
			cur, curEnc = trial, b
			continue
		}
		parts = append(parts, curEnc)
		cur = *blank
		s.take(&cur, w)
		if curEnc, err = encode(&cur); err != nil {
			return nil, err
		}
		if len(curEnc) > limit {
			return nil, fmt.Errorf("kafka: window %d: %s sketch alone takes %d bytes, more than %d: %w", w.Start, s.name, len(curEnc), limit, ErrTooLarge)
		}
	}
	parts = append(parts, curEnc)

	// The flows, in runs: first a guess from the state's size, then halves
	// of any run still too large.
	n := len(w.Flows)
	runs := max(1, min(n, 2*len(enc)/limit))
	for i := range runs {
		if parts, err = appendFlowParts(parts, blank, w.Flows[i*n/runs:(i+1)*n/runs], limit, encode); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// appendFlowParts appends the encodings of blank holding flows, split in
// halves until each fits in limit bytes.
func appendFlowParts(parts [][]byte, blank *metrics.Window, flows []metrics.FlowRecord, limit int, encode func(*metrics.Window) ([]byte, error)) ([][]byte, error) {
	if len(flows) == 0 {
		return parts, nil
	}
	p := *blank
	p.Flows = flows
	b, err := encode(&p)
	if err != nil {
		return nil, err
	}
	if len(b) <= limit {
		return append(parts, b), nil
	}
	if len(flows) == 1 {
		return nil, fmt.Errorf("kafka: window %d: one flow takes %d bytes, more than %d: %w", blank.Start, len(b), limit, ErrTooLarge)
	}
	h := len(flows) / 2
	if parts, err = appendFlowParts(parts, blank, flows[:h], limit, encode); err != nil {
		return nil, err
	}
	return appendFlowParts(parts, blank, flows[h:], limit, encode)
}

// sketchFields are the sketches of a window, each with how a part takes it
// from the whole window.
var sketchFields = []struct {
	name string
	take func(part, w *metrics.Window)
}{
	{"distinct", func(p, w *metrics.Window) { p.Distinct = w.Distinct }},
	{"flow_bytes", func(p, w *metrics.Window) { p.FlowBytes = w.FlowBytes }},
	{"flow_packets", func(p, w *metrics.Window) { p.FlowPackets = w.FlowPackets }},
	{"top", func(p, w *metrics.Window) { p.Top = w.Top }},
	{"read_latency", func(p, w *metrics.Window) { p.ReadLatency = w.ReadLatency }},
	{"ack_latency", func(p, w *metrics.Window) { p.AckLatency = w.AckLatency }},
}
