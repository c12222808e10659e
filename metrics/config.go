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

	// Sketch dimensions; zero selects the sketch package's defaults.
	DistinctBits int // Linear Counting bitmap bits
	CMDepth      int // Count-Min rows
	CMWidth      int // Count-Min columns
	TopKSize     int // heavy-hitter table entries
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
	return d, nil
}
