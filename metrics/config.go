package metrics

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/rocescope/rocescope/capture/filter"
	"github.com/rocescope/rocescope/sketch"
)

// Config shapes an [Engine]. The zero value of each field selects its
// default; a nil *Config means all defaults. The engine copies the Config and
// never changes it.
type Config struct {
	Host         string        // name written into reports and states; default os.Hostname
	Window       time.Duration // window length; default 1s
	Lateness     time.Duration // how long a window stays open after its end; default Window/10, at most Window
	Workers      int           // worker goroutines; default runtime.NumCPU(); 1 with one source runs everything on the reader
	TableSize    int           // QP table capacity in flows, over all workers; default 1<<20
	Top          int           // flows in a report's top list; default 20
	ElephantRate float64       // bits/s at or above which a flow is an elephant; default 1 Gb/s
	JitterRate   float64       // bits/s of rate change that makes an elephant a jitter flow; default 1 Gb/s
	RoCEPort     uint16        // UDP port of RoCEv2; default 4791
	Seed         uint64        // flow hash seed; default sketch.DefaultSeed
	Exact        bool          // keep every flow in the report and the sketches' measured error
	Live         bool          // windows also close by the wall clock (live capture), and kernel drops are counted
	// Filter selects the frames analyzed: the others count in Filtered
	// (and in Packets and Bytes) and nowhere else. Nil analyzes every
	// frame. It is shared by the readers: it must not change while the
	// engine runs.
	Filter *filter.Set

	// LinkRate is the rate of the mirrored links, bits/s: a PFC pause
	// quantum lasts 512 bit times at it, and an incast is measured
	// against it; default 100 Gb/s.
	LinkRate float64
	// Burst is the burst interval: the slot length of the flows'
	// activity profiles (Activity), which incasts are found in; from 1µs
	// to MaxBurst, dividing Window into at most MaxSlots; default 1ms (for
	// a window that is no multiple of it, the longest of 100µs, 10µs and
	// 1µs that divides it).
	Burst time.Duration
	// Rules are the thresholds of the diagnoses a report names.
	Rules Rules

	// Sketch dimensions; zero selects the sketch package's defaults.
	DistinctBits int // Linear Counting bitmap bits
	CMDepth      int // Count-Min rows
	CMWidth      int // Count-Min columns
	TopKSize     int // heavy-hitter table entries
}

// Rules are the thresholds of the events (diagnoses) a report names; the
// zero value of each field selects its default. The defaults fire on clear
// trouble and stay silent on healthy traffic.
type Rules struct {
	// An incast into a destination address is a burst interval in which
	// flows from at least IncastSources distinct source addresses send to
	// it, together at least IncastLoad of LinkRate (default 4 sources and
	// 0.8, the utilisation sFlow-RT's incast monitor uses).
	IncastSources int
	IncastLoad    float64
	// A PFC storm is a span of at least StormInterval in which a priority
	// was paused by one source MAC at least StormPaused of the time
	// (default 200ms and 0.99, as the PFC watchdogs of SONiC and Junos).
	StormInterval time.Duration
	StormPaused   float64
	// A retransmission episode is an event when it resent at least
	// RetransResent frames (default 1: every episode) after a stall of at
	// least RetransStall (default 0).
	RetransResent int
	RetransStall  time.Duration
	// A flow that received at least CEMarks CE-marked frames in a window
	// while its receiver, whose direction the capture shows, sent no CNP
	// back for it is a ce_without_cnp event (default 16).
	CEMarks int
	// MaxEvents bounds the events of each kind a report lists (default
	// 256); a report counts the ones it leaves out.
	MaxEvents int
}

// Defaults of [Config].
const (
	DefaultWindow       = time.Second
	DefaultTableSize    = 1 << 20
	DefaultTop          = 20
	DefaultElephantRate = 1e9
	DefaultJitterRate   = 1e9
	DefaultRoCEPort     = 4791
	DefaultTopKSize     = 1024
	DefaultCMDepth      = 4
	DefaultCMWidth      = 1 << 16
	DefaultLinkRate     = 100e9
	DefaultBurst        = time.Millisecond
	MaxBurst            = 10 * time.Millisecond // a slot of a 1.6 Tb/s link holds less than 4 GiB

	DefaultIncastSources = 4
	DefaultIncastLoad    = 0.8
	DefaultStormInterval = 200 * time.Millisecond
	DefaultStormPaused   = 0.99
	DefaultRetransResent = 1
	DefaultCEMarks       = 16
	DefaultMaxEvents     = 256
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid configuration")

// WithDefaults returns a copy of c with defaults filled in, or an error
// naming the first invalid field.
func (c *Config) WithDefaults() (Config, error) {
	var d Config
	if c != nil {
		d = *c
	}
	if d.Window == 0 {
		d.Window = DefaultWindow
	}
	if d.Window < time.Millisecond {
		return d, fmt.Errorf("metrics: window %v is below 1ms: %w", d.Window, ErrConfig)
	}
	if d.Lateness == 0 {
		d.Lateness = d.Window / 10
	}
	if d.Lateness < 0 || d.Lateness > d.Window {
		return d, fmt.Errorf("metrics: lateness %v must be between 0 and the window %v: %w", d.Lateness, d.Window, ErrConfig)
	}
	if d.Workers == 0 {
		d.Workers = runtime.NumCPU()
	}
	if d.Workers < 1 || d.Workers > 256 {
		return d, fmt.Errorf("metrics: workers %d must be between 1 and 256: %w", d.Workers, ErrConfig)
	}
	if d.TableSize == 0 {
		d.TableSize = DefaultTableSize
	}
	if d.TableSize < d.Workers || d.TableSize > 1<<28 {
		return d, fmt.Errorf("metrics: table size %d must be between the worker count and 2^28: %w", d.TableSize, ErrConfig)
	}
	if d.Top == 0 {
		d.Top = DefaultTop
	}
	if d.Top < 0 {
		return d, fmt.Errorf("metrics: top %d is negative: %w", d.Top, ErrConfig)
	}
	if d.ElephantRate == 0 {
		d.ElephantRate = DefaultElephantRate
	}
	if d.JitterRate == 0 {
		d.JitterRate = DefaultJitterRate
	}
	if !(d.ElephantRate >= 0 && d.JitterRate >= 0) || math.IsInf(d.ElephantRate, 0) || math.IsInf(d.JitterRate, 0) {
		return d, fmt.Errorf("metrics: elephant and jitter rates must be finite and not negative: %w", ErrConfig)
	}
	if d.RoCEPort == 0 {
		d.RoCEPort = DefaultRoCEPort
	}
	if d.Seed == 0 {
		d.Seed = sketch.DefaultSeed
	}
	if d.CMDepth == 0 {
		d.CMDepth = DefaultCMDepth
	}
	if d.CMWidth == 0 {
		d.CMWidth = DefaultCMWidth
	}
	if d.TopKSize == 0 {
		d.TopKSize = DefaultTopKSize
	}
	if d.LinkRate == 0 {
		d.LinkRate = DefaultLinkRate
	}
	if !(d.LinkRate > 0) || math.IsInf(d.LinkRate, 0) {
		return d, fmt.Errorf("metrics: link rate %v must be finite and above 0: %w", d.LinkRate, ErrConfig)
	}
	if d.Burst == 0 {
		// 1ms, or for a window that is no multiple of it the longest of
		// 100µs, 10µs and 1µs that divides it.
		d.Burst = DefaultBurst
		for d.Window%d.Burst != 0 && d.Burst > time.Microsecond {
			d.Burst /= 10
		}
	}
	if d.Burst < time.Microsecond || d.Burst > MaxBurst || d.Window%d.Burst != 0 {
		return d, fmt.Errorf("metrics: burst interval %v must be from 1µs to %v and divide the window %v: %w", d.Burst, MaxBurst, d.Window, ErrConfig)
	}
	if d.Window/d.Burst > MaxSlots {
		return d, fmt.Errorf("metrics: window %v holds more than %d burst intervals of %v: %w", d.Window, MaxSlots, d.Burst, ErrConfig)
	}
	return d, d.Rules.withDefaults()
}

// withDefaults fills in the defaults of r and checks it.
func (r *Rules) withDefaults() error {
	if r.IncastSources == 0 {
		r.IncastSources = DefaultIncastSources
	}
	if r.IncastLoad == 0 {
		r.IncastLoad = DefaultIncastLoad
	}
	if r.StormInterval == 0 {
		r.StormInterval = DefaultStormInterval
	}
	if r.StormPaused == 0 {
		r.StormPaused = DefaultStormPaused
	}
	if r.RetransResent == 0 {
		r.RetransResent = DefaultRetransResent
	}
	if r.CEMarks == 0 {
		r.CEMarks = DefaultCEMarks
	}
	if r.MaxEvents == 0 {
		r.MaxEvents = DefaultMaxEvents
	}
	switch {
	case r.IncastSources < 2:
		return fmt.Errorf("metrics: incast sources %d must be at least 2: %w", r.IncastSources, ErrConfig)
	case !(r.IncastLoad > 0 && r.IncastLoad <= 1), !(r.StormPaused > 0 && r.StormPaused <= 1):
		return fmt.Errorf("metrics: incast load %v and storm paused fraction %v must be in (0, 1]: %w", r.IncastLoad, r.StormPaused, ErrConfig)
	case r.StormInterval < 0, r.RetransStall < 0:
		return fmt.Errorf("metrics: storm interval %v and retransmission stall %v must not be negative: %w", r.StormInterval, r.RetransStall, ErrConfig)
	case r.RetransResent < 1, r.CEMarks < 1, r.MaxEvents < 1:
		return fmt.Errorf("metrics: retransmission resent %d, CE marks %d and max events %d must be at least 1: %w", r.RetransResent, r.CEMarks, r.MaxEvents, ErrConfig)
	}
	return nil
}
