//go:build linux

package netnstest

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// untagged returns frame as a packet socket on the receiving side sees it:
// the kernel moves the outermost 802.1Q or 802.1ad tag into the socket's
// auxiliary data.
func untagged(frame []byte) []byte {
	switch binary.BigEndian.Uint16(frame[12:]) {
	case 0x8100, 0x88a8:
		return append(append([]byte(nil), frame[:12]...), frame[16:]...)
	}
	return frame
}

// TestPairLive sends traffic from NSA and receives it with a plain
// AF_PACKET socket on IfB in NSB: every frame must arrive exactly once and
// byte for byte (less the outer VLAN tag the kernel strips). Frames nobody
// sent (IPv6 multicast listener reports) are counted and logged.
func TestPairLive(t *testing.T) {
	p := New(t)
	var fd int
	err := p.Do(p.NSB, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
			return err
		}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: p.IndexB})
	})
	if err != nil {
		t.Fatalf("receiver in %s: %v", p.NSB, err)
	}
	t.Cleanup(func() { unix.Close(fd) })

	frames := Traffic(3000, 1000, 3)
	want := make(map[string]int, len(frames))
	for _, f := range frames {
		want[string(untagged(f))]++
	}
	n, err := p.Send(frames)
	if err != nil || n != len(frames) {
		t.Fatalf("Send = %d, %v; want %d, nil", n, err, len(frames))
	}

	buf := make([]byte, 65536)
	got, extra := 0, 0
	for got < len(frames) {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) {
			break // nothing for 2 s: the rest is missing
		}
		if err != nil {
			t.Fatalf("recvfrom on %s: %v", p.IfB, err)
		}
		k := string(buf[:m])
		if want[k] == 0 {
			extra++
			continue
		}
		want[k]--
		got++
	}
	if got != len(frames) {
		t.Errorf("received %d of %d sent frames", got, len(frames))
	}
	t.Logf("received %d sent frames and %d others", got, extra)
}

// htons converts a 16-bit protocol number to network byte order, as
// AF_PACKET socket calls want it.
func htons(v uint16) uint16 { return v<<8 | v>>8 }
