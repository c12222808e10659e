package netdev

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/internal/netnstest"
)

func TestIndexMissing(t *testing.T) {
	for _, name := range []string{"rs-no-such-if0", "a-name-far-too-long-for-ifnamsiz", ""} {
		_, err := Index(name)
		if !errors.Is(err, capture.ErrInterfaceNotFound) || err.Error() != "capture: interface "+name+" not found" {
			t.Errorf("Index(%q) = %v, want capture: interface %s not found", name, err, name)
		}
		if _, err := RXQueues(name); !errors.Is(err, capture.ErrInterfaceNotFound) {
			t.Errorf("RXQueues(%q) = %v, want capture.ErrInterfaceNotFound", name, err)
		}
	}
}

func TestIndexLoopback(t *testing.T) {
	got, err := Index("lo")
	if err != nil || got != 1 {
		t.Errorf("Index(lo) = %d, %v; want 1 (the loopback device is made first)", got, err)
	}
}

// TestRXQueuesLive makes veth pairs with 1 and 3 receive queues in a test
// namespace and asks from inside it.
func TestRXQueuesLive(t *testing.T) {
	p := netnstest.New(t)
	name := p.IfB + "q"
	if out, err := exec.Command("ip", "-n", p.NSB, "link", "add", name, "numrxqueues", "3", "type", "veth", "peer", "name", name+"p").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	for _, c := range []struct {
		iface string
		want  int
	}{{p.IfB, 1}, {name, 3}} {
		var got, index int
		err := p.Do(p.NSB, func() (err error) {
			if index, err = Index(c.iface); err != nil {
				return err
			}
			got, err = RXQueues(c.iface)
			return err
		})
		if err != nil || got != c.want {
			t.Errorf("RXQueues(%s) = %d, %v; want %d", c.iface, got, err, c.want)
		}
		if c.iface == p.IfB && index != p.IndexB {
			t.Errorf("Index(%s) = %d, want %d", c.iface, index, p.IndexB)
		}
	}
	// The test namespace's interface is not in this one.
	if _, err := Index(p.IfB); !errors.Is(err, capture.ErrInterfaceNotFound) || !strings.Contains(err.Error(), p.IfB) {
		t.Errorf("Index(%s) outside its namespace = %v, want not found", p.IfB, err)
	}
}
