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
	Lateness     time.Duration // how long a window stays open after its end, at most Window; default Window/10, NoLateness for none
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

// NoLateness, as Config.Lateness, closes each window at its end: no frame
// of it is taken later.
const NoLateness time.Duration = -1

// ConfigError is an invalid field of a [Config] (or of its Rules): its Go
// name, its value and what it must be. It wraps [ErrConfig].
type ConfigError struct {
	Field string // "Window", "ElephantRate", "IncastLoad", ...
	Value any
	Want  string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("metrics: %s %v: want %s", e.Field, e.Value, e.Want)
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// WithDefaults returns a copy of c with defaults filled in for its zero
// fields, or the error of [Config.Validate] on it.
func (c *Config) WithDefaults() (Config, error) {
	var d Config
	if c != nil {
		d = *c
	}
	if d.Window == 0 {
		d.Window = DefaultWindow
	}
	if d.Lateness == 0 {
		d.Lateness = d.Window / 10
	}
	if d.Workers == 0 {
		d.Workers = runtime.NumCPU()
	}
	if d.TableSize == 0 {
		d.TableSize = DefaultTableSize
	}
	if d.Top == 0 {
		d.Top = DefaultTop
	}
	if d.ElephantRate == 0 {
		d.ElephantRate = DefaultElephantRate
	}
	if d.JitterRate == 0 {
		d.JitterRate = DefaultJitterRate
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
	if d.Burst == 0 {
		// 1ms, or for a window that is no multiple of it the longest of
		// 100µs, 10µs and 1µs that divides it.
		d.Burst = DefaultBurst
		for d.Window%d.Burst != 0 && d.Burst > time.Microsecond {
			d.Burst /= 10
		}
	}
	d.Rules.withDefaults()
	return d, d.Validate()
}

// Validate reports the first field of c out of its range, as a
// *[ConfigError]. It takes c as it is: a zero is a value like any other,
// refused where it means nothing (a zero window, workers, top list, rate
// or rule), except in the fields whose zero has a meaning of its own:
// Lateness (Window/10), Host, Seed and the sketch dimensions (their
// defaults, which [Config.WithDefaults] fills in). The sketch dimensions are
// checked by [New].
func (c *Config) Validate() error {
	bad := func(field string, v any, want string, args ...any) error {
		return &ConfigError{Field: field, Value: v, Want: fmt.Sprintf(want, args...)}
	}
	rate := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
	switch r := &c.Rules; {
	case c.Window < time.Millisecond:
		return bad("Window", c.Window, "at least 1ms")
	case c.Lateness != NoLateness && (c.Lateness < 0 || c.Lateness > c.Window):
		return bad("Lateness", c.Lateness, "0 to the window (%v)", c.Window)
	case c.Workers < 1:
		return bad("Workers", c.Workers, "at least 1")
	case c.Workers > 256:
		return bad("Workers", c.Workers, "at most 256")
	case c.TableSize < c.Workers || c.TableSize > MaxTableSize:
		return bad("TableSize", c.TableSize, "between the workers (%d) and %d flows", c.Workers, MaxTableSize)
	case c.Top < 1:
		return bad("Top", c.Top, "at least 1")
	case !rate(c.ElephantRate):
		return bad("ElephantRate", c.ElephantRate, "more than 0 (finite)")
	case !rate(c.JitterRate):
		return bad("JitterRate", c.JitterRate, "more than 0 (finite)")
	case c.RoCEPort == 0:
		return bad("RoCEPort", c.RoCEPort, "a UDP port from 1 to 65535")
	case !rate(c.LinkRate):
		return bad("LinkRate", c.LinkRate, "more than 0 (finite)")
	case c.Burst < time.Microsecond || c.Burst > MaxBurst || c.Window%c.Burst != 0 || c.Window/c.Burst > MaxSlots:
		return bad("Burst", c.Burst, "1µs to %v, dividing the window (%v) into at most %d", MaxBurst, c.Window, MaxSlots)
	case r.IncastSources < 2:
		return bad("IncastSources", r.IncastSources, "at least 2")
	case !(r.IncastLoad > 0 && r.IncastLoad <= 1):
		return bad("IncastLoad", r.IncastLoad, "more than 0, at most 1")
	case r.StormInterval <= 0:
		return bad("StormInterval", r.StormInterval, "more than 0")
	case !(r.StormPaused > 0 && r.StormPaused <= 1):
		return bad("StormPaused", r.StormPaused, "more than 0, at most 1")
	case r.RetransResent < 1:
		return bad("RetransResent", r.RetransResent, "at least 1")
	case r.RetransStall < 0:
		return bad("RetransStall", r.RetransStall, "0 or more")
	case r.CEMarks < 1:
		return bad("CEMarks", r.CEMarks, "at least 1")
	case r.MaxEvents < 1:
		return bad("MaxEvents", r.MaxEvents, "at least 1")
	}
	return nil
}

// MaxTableSize is the largest QP table an engine takes, in flows.
const MaxTableSize = 1 << 28

// withDefaults fills in the defaults of r.
func (r *Rules) withDefaults() {
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
}
