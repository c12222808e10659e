package export

import (
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// appendEvents appends events as a JSON array of objects with the event
// keys of the report contract: kind, id, start_ns, end_ns, ongoing, then
// the kind's own.
func appendEvents(b []byte, events []report.Event) []byte {
	b = append(b, '[')
	for i := range events {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendEventJSON(b, &events[i])
	}
	return append(b, ']')
}

// AppendEventJSON appends the event as a JSON object.
func AppendEventJSON(b []byte, e *report.Event) []byte {
	o := openObject(b)
	o.string("kind", e.Kind.String())
	o.text("id", e.ID.AppendText)
	o.int("start_ns", e.Start)
	o.int("end_ns", e.End)
	o.bool("ongoing", e.Ongoing)
	switch {
	case e.Incast != nil:
		in := e.Incast
		o.text("dst", in.Dst.AppendTo)
		o.uint("sender_count", uint64(in.SenderCount))
		o.uint("sources", uint64(in.Sources))
		o.float("peak_bps", in.PeakBPS)
		o.uint("bytes", in.Bytes)
		o.uint("ecn_ce", in.ECNCE)
		o.uint("cnp", in.CNP)
		o.key("senders")
		o.b = append(o.b, '[')
		for i := range in.Senders {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			s := &in.Senders[i]
			x := openObject(o.b)
			appendFlowID(&x, &s.Flow)
			x.uint("bytes", s.Bytes)
			x.float("share", s.Share)
			o.b = x.close()
		}
		o.b = append(o.b, ']')
	case e.PFCStorm != nil:
		st := e.PFCStorm
		o.text("mac", func(b []byte) []byte { return report.AppendMAC(b, st.MAC) })
		o.uint("priority", uint64(st.Priority))
		o.int("paused_ns", st.PausedNS)
		o.float("paused_fraction", st.PausedFraction)
		o.uint("frames", st.Frames)
	case e.Retransmission != nil:
		rt := e.Retransmission
		appendFlowID(&o, &rt.Flow)
		o.string("cause", rt.Cause.String())
		o.uint("first_psn", uint64(rt.FirstPSN))
		o.uint("resent", rt.Resent)
		o.int("stall_ns", rt.StallNS)
		switch rt.Cause {
		case metrics.CauseNAK:
			o.uint("nak_code", uint64(rt.NAKCode))
		case metrics.CauseRNR:
			o.uint("rnr_timer", uint64(rt.NAKCode))
		}
		if rt.Merged {
			o.bool("merged", true)
		}
	case e.CEWithoutCNP != nil:
		ce := e.CEWithoutCNP
		appendFlowID(&o, &ce.Flow)
		o.uint("ecn_ce", ce.ECNCE)
		o.uint("cnp", 0)
		o.uint("packets", ce.Packets)
		o.uint("reverse_packets", ce.ReversePackets)
	}
	return o.close()
}

// appendFlowID writes the keys that name a flow: src, dst, dqp and dqp_hex,
// and sqp and sqp_hex when known.
func appendFlowID(o *jsonObject, f *report.Flow) {
	o.text("src", f.Key.Src.AppendTo)
	o.text("dst", f.Key.Dst.AppendTo)
	o.uint("dqp", uint64(f.Key.DQP))
	o.text("dqp_hex", func(b []byte) []byte { return AppendQP(b, f.Key.DQP) })
	if f.SQPKnown {
		o.uint("sqp", uint64(f.SQP))
		o.text("sqp_hex", func(b []byte) []byte { return AppendQP(b, f.SQP) })
	}
}
