//go:build !linux

package afpacket

import (
	"os"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/filter"
)

// Group is a set of capture sockets on one interface. On this system Open
// never returns one.
type Group struct{}

// Open checks cfg and returns ErrUnsupported: AF_PACKET exists only on
// Linux.
func Open(iface string, cfg *Config) (*Group, error) {
	if _, err := validate(cfg, os.Getpagesize()); err != nil {
		return nil, err
	}
	return nil, &OpError{Op: "open", Iface: iface, Err: ErrUnsupported}
}

// Sources returns nil.
func (g *Group) Sources() []capture.Source { return nil }

// Close does nothing.
func (g *Group) Close() error { return nil }

// Describe says that AF_PACKET is unsupported.
func (g *Group) Describe() string { return "AF_PACKET (unsupported on this system)" }

// Filter returns nil.
func (g *Group) Filter() *filter.Expr { return nil }
