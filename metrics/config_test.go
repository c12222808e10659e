package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/rocescope/rocescope/sketch"
)

// TestConfigZerosAreValues: Validate takes a zero as a value, refusing it
// where it means nothing and naming the field; WithDefaults fills zeros in;
// NoLateness is no lateness, for the reader too.
func TestConfigZerosAreValues(t *testing.T) {
	full, err := (&Config{Workers: 2}).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if full.Lateness != full.Window/10 || full.ElephantRate != DefaultElephantRate {
		t.Errorf("defaults: lateness %v, elephant rate %v", full.Lateness, full.ElephantRate)
	}
	for _, tc := range []struct {
		field string
		set   func(*Config)
	}{
		{"ElephantRate", func(c *Config) { c.ElephantRate = 0 }},
		{"JitterRate", func(c *Config) { c.JitterRate = 0 }},
		{"Top", func(c *Config) { c.Top = 0 }},
		{"Workers", func(c *Config) { c.Workers = 0 }},
		{"Lateness", func(c *Config) { c.Lateness = -2 }},
		{"Lateness", func(c *Config) { c.Lateness = c.Window + 1 }},
		{"StormInterval", func(c *Config) { c.Rules.StormInterval = 0 }},
		{"Burst", func(c *Config) { c.Burst = 3 * time.Millisecond }},
	} {
		c := full
		tc.set(&c)
		var ce *ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v, want a ConfigError of the field", tc.field, err)
		}
	}
	for _, l := range []time.Duration{NoLateness, 0, full.Window} {
		c := full
		c.Lateness = l
		if err := c.Validate(); err != nil {
			t.Errorf("lateness %v: %v", l, err)
		}
	}
	c := full
	c.Lateness = NoLateness
	if r := newReader(&c, nil); r.lateness != 0 {
		t.Errorf("NoLateness: the reader waits %d ns", r.lateness)
	}
}

// TestSketchShapesRefused: a window's sketches of a shape the sketch
// package refuses are an error of that package, not a panic, whether the
// counters would be mapped or not.
func TestSketchShapesRefused(t *testing.T) {
	for _, set := range []func(*Config){
		func(c *Config) { c.CMDepth = -1 },
		func(c *Config) { c.CMWidth = -8 },
		func(c *Config) { c.CMWidth = 3 },
		func(c *Config) { c.CMDepth, c.CMWidth = 8, 1<<30 },
		func(c *Config) { c.CMDepth, c.CMWidth = 4, 1<<62 }, // 2^64 cells: 0 in an int
		func(c *Config) { c.CMDepth = sketch.MaxCountMinDepth + 1 },
	} {
		c, err := (&Config{Workers: 1}).WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		set(&c)
		if _, err := newWindow(&c); !errors.Is(err, sketch.ErrConfig) {
			t.Errorf("count-min %d×%d: %v, want sketch.ErrConfig", c.CMDepth, c.CMWidth, err)
		}
	}
}
