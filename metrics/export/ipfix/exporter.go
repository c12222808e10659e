package ipfix

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
)

// Defaults of Options.
const (
	// DefaultPEN is the Private Enterprise Number of the enterprise
	// elements: 32473, which RFC 5612 reserves for documentation and
	// examples. rocescope has no number of its own; give your
	// organization's (?pen=N) where several exporters' enterprise elements
	// meet in one collector.
	DefaultPEN = 32473
	// DefaultDomain is the observation domain ID of the messages.
	DefaultDomain = 1
	// DefaultMaxMessageBytes bounds a message (the UDP payload): within a
	// 1500-byte path MTU with room for IPv6, UDP and a tunnel header.
	DefaultMaxMessageBytes = 1400
	// DefaultTemplateRefresh and DefaultTemplateRefreshMessages say how
	// often, over UDP, a template is sent again before its next data
	// record: after this much time or this many messages, whichever
	// comes first, so that a collector that starts late or restarts
	// learns it soon.
	DefaultTemplateRefresh         = 30 * time.Second
	DefaultTemplateRefreshMessages = 20
	// DefaultRoCEPort is the UDP destination port of RoCEv2.
	DefaultRoCEPort = 4791
)

// maxUDPMessage is the largest UDP payload over IPv4.
const maxUDPMessage = 65507

// Options configure an Exporter; nil means the defaults.
type Options struct {
	PEN    uint32 // enterprise number of the enterprise elements (default DefaultPEN)
	Domain uint32 // observation domain ID (default DefaultDomain)
	// MaxMessageBytes bounds a message (default DefaultMaxMessageBytes);
	// it must hold a template and a record of the largest template.
	MaxMessageBytes int
	// TemplateRefresh and TemplateRefreshMessages pace the templates over
	// UDP (defaults DefaultTemplateRefresh and
	// DefaultTemplateRefreshMessages); over TCP a template is sent once
	// per connection, as RFC 7011 section 8.1 asks.
	TemplateRefresh         time.Duration
	TemplateRefreshMessages int
	// MaxRate bounds the messages sent per second, on average over
	// bursts of paceBurst messages; 0 sends as fast as the socket takes
	// them. A collector whose socket buffer a window's burst overflows
	// drops messages (the sequence numbers show it): pacing spreads them
	// out, at the price of Write taking longer.
	MaxRate int
	// RoCEPort is the destinationTransportPort of RoCEv2 flows (default
	// DefaultRoCEPort).
	RoCEPort uint16
	// ErrorLog receives a line when sending starts to fail and when it
	// works again; nil discards them.
	ErrorLog io.Writer
	// Now returns the export time (default time.Now).
	Now func() time.Time
}

func (o *Options) withDefaults() (Options, error) {
	var d Options
	if o != nil {
		d = *o
	}
	if d.PEN == 0 {
		d.PEN = DefaultPEN
	}
	if d.Domain == 0 {
		d.Domain = DefaultDomain
	}
	if d.MaxMessageBytes == 0 {
		d.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if min := minMessageBytes(); d.MaxMessageBytes < min || d.MaxMessageBytes > maxUDPMessage {
		return d, fmt.Errorf("ipfix: max message bytes %d: want %d to %d (a template and a record must fit): %w", d.MaxMessageBytes, min, maxUDPMessage, ErrTarget)
	}
	if d.TemplateRefresh == 0 {
		d.TemplateRefresh = DefaultTemplateRefresh
	}
	if d.TemplateRefreshMessages == 0 {
		d.TemplateRefreshMessages = DefaultTemplateRefreshMessages
	}
	if d.TemplateRefresh < 0 || d.TemplateRefreshMessages < 0 {
		return d, fmt.Errorf("ipfix: template refresh %v and %d messages: want more than 0: %w", d.TemplateRefresh, d.TemplateRefreshMessages, ErrTarget)
	}
	if d.MaxRate < 0 {
		return d, fmt.Errorf("ipfix: max rate %d messages/s: want 0 (no bound) or more: %w", d.MaxRate, ErrTarget)
	}
	if d.RoCEPort == 0 {
		d.RoCEPort = DefaultRoCEPort
	}
	if d.ErrorLog == nil {
		d.ErrorLog = io.Discard
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return d, nil
}

// minMessageBytes is the smallest message that holds the largest template
// and one record of it, each in its set.
func minMessageBytes() int {
	n := 0
	for _, t := range makeTemplates(0) {
		n = max(n, headerLen+2*setHeaderLen+len(t.record)+t.recLen)
	}
	return n
}

// Stats count what an Exporter sent.
type Stats struct {
	Messages, Records uint64 // sent
	// LostMessages failed to send; LostRecords were in them or in the
	// windows a TCP collector was down for. Records lost in a message
	// still count in the sequence numbers, so the collector sees the gap.
	LostMessages, LostRecords uint64
	Unexportable              uint64 // flows whose addresses are of no kind a template holds
}

// Exporter sends each window's flow records to an IPFIX collector: one
// data record per flow of the window's QP tables ([metrics.Window.Flows];
// flows only the sketches saw have no record). It is a [export.Sink]:
// Write encodes and sends a window's messages before it returns. An
// Exporter is not safe for concurrent use.
//
// Sending never stops a run: a message that cannot be sent is counted,
// the first failure of a run of them is logged, and Close returns an error
// that says how many were lost. Lost messages still advance the sequence
// numbers, so the collector sees the gap.
type Exporter struct {
	t    *Target
	o    Options
	tmpl [numTemplates]template
	conn net.Conn
	log  *log.Logger

	msg   message
	seq   uint32             // data records of the stream before the message being built
	fresh [numTemplates]bool // template sent since the last refresh point
	// Template refresh over UDP: when the last refresh point was, and the
	// messages since.
	refreshed    time.Time
	sinceRefresh int
	failures     int // sends failed since sending last worked again
	sentInARow   int // sends that worked since the last failure
	firstErr     error
	idx          [numTemplates][]int32 // scratch: flow positions by template
	stats        Stats
	paced        time.Time // when the last message may leave, with MaxRate
}

var _ export.Sink = (*Exporter)(nil)

// ErrTarget reports an IPFIX URL or option that is not valid.
var ErrTarget = errors.New("not a valid IPFIX target")

// New returns an exporter to t. A TCP collector is dialed at once, so that
// one that is down is reported before the run starts.
func New(t *Target, opts *Options) (*Exporter, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Exporter{t: t, o: o, tmpl: makeTemplates(o.PEN), log: log.New(o.ErrorLog, "rocescope: ipfix: ", 0)}
	if err := e.dial(); err != nil {
		return nil, err
	}
	return e, nil
}

// dial connects to the collector, starting a new transport session: the
// sequence numbers start again at 0 and every template is sent again.
func (e *Exporter) dial() error {
	c, err := net.DialTimeout(e.t.Network, e.t.Addr, dialTimeout)
	if err != nil {
		return fmt.Errorf("ipfix: collector %s://%s: %w", e.t.Network, e.t.Addr, err)
	}
	e.conn, e.seq, e.fresh = c, 0, [numTemplates]bool{}
	e.refreshed, e.sinceRefresh = e.o.Now(), 0
	return nil
}

// Timeouts of the TCP transport.
const (
	dialTimeout  = 5 * time.Second
	writeTimeout = 5 * time.Second
)

// Stats returns what the exporter sent so far.
func (e *Exporter) Stats() Stats { return e.stats }

// Write sends one data record for each flow of the report's window.
func (e *Exporter) Write(r *report.Report) error {
	w := r.Window
	from, to := w.From, w.To
	if w.Covered() == 0 {
		from, to = w.Start, w.Start+w.Length
	}
	s := span{start: ntpTime(from), end: ntpTime(to), dport: e.o.RoCEPort}
	for t := range e.idx {
		e.idx[t] = e.idx[t][:0]
	}
	for i := range w.Flows {
		t, ok := templateOf(&w.Flows[i])
		if !ok {
			e.stats.Unexportable++
			continue
		}
		e.idx[t] = append(e.idx[t], int32(i))
	}
	if e.conn == nil {
		// TCP, broken in an earlier window: dial again, or lose this
		// window and try at the next.
		if err := e.dial(); err != nil {
			e.fail(err)
			for t := range e.idx {
				e.stats.LostRecords += uint64(len(e.idx[t]))
			}
			return nil
		}
	}
	e.begin()
	for t := range e.idx {
		tp := &e.tmpl[t]
		for _, i := range e.idx[t] {
			e.room(t)
			if !e.fresh[t] {
				e.msg.openSet(templateSetID)
				e.msg.buf = append(e.msg.buf, tp.record...)
				e.msg.templates |= 1 << t
				e.fresh[t] = true
			}
			if e.msg.set < 0 || e.msg.setID != tp.id {
				e.msg.openSet(tp.id)
			}
			e.msg.buf = appendRecord(e.msg.buf, tp, &w.Flows[i], r.FlowCNP(int(i)), &s)
			e.msg.records++
		}
	}
	if e.msg.records > 0 {
		e.send()
	}
	return nil
}

// recovered is how many sends in a row must work after failures before
// sending is said to work again: a closed UDP port fails every other send
// (the kernel returns the ICMP error of one send from the next), which
// must not log two lines per message.
const recovered = 8

// room makes room in the message for a record of template t, with its
// set header and template when they are due, sending the message first
// if it is full.
func (e *Exporter) room(t int) {
	for {
		tp := &e.tmpl[t]
		need := tp.recLen
		if !e.fresh[t] {
			need += 2*setHeaderLen + len(tp.record)
		} else if e.msg.set < 0 || e.msg.setID != tp.id {
			need += setHeaderLen
		}
		if len(e.msg.buf)+need <= e.o.MaxMessageBytes {
			return
		}
		// The options guarantee that a template and a record fit into
		// an empty message, so this loops at most twice.
		e.send()
		e.begin()
	}
}

// begin starts a message. Over UDP it first marks every template stale
// when a refresh is due, so that each is sent again before its next
// record.
func (e *Exporter) begin() {
	e.msg.begin()
	if e.t.Network != "udp" {
		return
	}
	if now := e.o.Now(); e.sinceRefresh >= e.o.TemplateRefreshMessages || now.Sub(e.refreshed) >= e.o.TemplateRefresh {
		e.fresh = [numTemplates]bool{}
		e.refreshed, e.sinceRefresh = now, 0
	}
}

// paceBurst is how many messages MaxRate lets go at once.
const paceBurst = 32

// pace waits, with MaxRate, until the next message may leave.
func (e *Exporter) pace() {
	if e.o.MaxRate == 0 {
		return
	}
	interval := time.Second / time.Duration(e.o.MaxRate)
	now := time.Now()
	if floor := now.Add(-paceBurst * interval); e.paced.Before(floor) {
		e.paced = floor
	}
	e.paced = e.paced.Add(interval)
	if d := e.paced.Sub(now); d >= time.Millisecond {
		time.Sleep(d)
	}
}

// send finishes the message and sends it.
func (e *Exporter) send() {
	e.pace()
	b := e.msg.finish(uint32(e.o.Now().Unix()), e.seq, e.o.Domain)
	n := e.msg.records
	e.seq += n // modulo 2^32
	e.sinceRefresh++
	if e.conn == nil {
		// TCP, broken earlier in this window: the next window dials
		// again, and a new connection sends every template.
		e.stats.LostMessages++
		e.stats.LostRecords += uint64(n)
		return
	}
	if e.t.Network == "tcp" {
		e.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	if _, err := e.conn.Write(b); err != nil {
		e.fail(err)
		e.stats.LostMessages++
		e.stats.LostRecords += uint64(n)
		// The templates it carried did not go out: send them again.
		for t := range e.fresh {
			if e.msg.templates&(1<<t) != 0 {
				e.fresh[t] = false
			}
		}
		if e.t.Network == "tcp" {
			// The stream is broken mid-message: drop the connection
			// and dial again at the next window.
			e.conn.Close()
			e.conn = nil
		}
		return
	}
	e.sentInARow++
	if e.failures > 0 && e.sentInARow >= recovered {
		e.log.Printf("sending to %s://%s works again after %d failures", e.t.Network, e.t.Addr, e.failures)
		e.failures = 0
	}
	e.stats.Messages++
	e.stats.Records += uint64(n)
}

// fail notes a failure to send: the first of a run of them is logged.
func (e *Exporter) fail(err error) {
	if e.failures == 0 {
		e.log.Printf("sending to %s://%s: %v; counting the records lost (the collector sees the gap in the sequence numbers)", e.t.Network, e.t.Addr, err)
	}
	if e.firstErr == nil {
		e.firstErr = err
	}
	e.failures++
	e.sentInARow = 0
}

// Flush implements export.Sink: Write sends each window at once.
func (e *Exporter) Flush() error { return nil }

// Close closes the connection. It returns an error that counts the records
// that could not be sent or exported, if any.
func (e *Exporter) Close() error {
	var err error
	if e.conn != nil {
		err = e.conn.Close()
		e.conn = nil
	}
	st := e.stats
	if st.LostRecords > 0 {
		err = errors.Join(err, fmt.Errorf("ipfix: %s://%s: %d of %d records (%d messages) could not be sent: first error: %w",
			e.t.Network, e.t.Addr, st.LostRecords, st.LostRecords+st.Records, st.LostMessages, e.firstErr))
	}
	if st.Unexportable > 0 {
		err = errors.Join(err, fmt.Errorf("ipfix: %d flow records have addresses of two kinds and were not exported", st.Unexportable))
	}
	return err
}
