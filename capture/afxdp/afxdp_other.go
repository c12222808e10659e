//go:build !linux

package afxdp

import (
	"errors"

	"github.com/rocescope/rocescope/capture"
)

// ErrUnsupported is returned by Open on systems other than Linux.
var ErrUnsupported = errors.New("afxdp: AF_XDP needs Linux")

// Group is the XDP program attached to one interface and its sockets. On
// this system it cannot be opened.
type Group struct{}

// Open returns ErrUnsupported.
func Open(iface string, cfg *Config) (*Group, error) {
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	return nil, ErrUnsupported
}

// Sources returns nil.
func (g *Group) Sources() []capture.Source { return nil }

// Describe says that AF_XDP is unsupported.
func (g *Group) Describe() string { return "AF_XDP (unsupported on this system)" }

// Counters returns ErrUnsupported.
func (g *Group) Counters() (Counters, error) { return Counters{}, ErrUnsupported }

// Close does nothing.
func (g *Group) Close() error { return nil }
