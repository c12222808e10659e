package afxdp

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/cilium/ebpf"
)

// redirects is the program's rule written plainly in Go, independently of
// the assembly: it reports whether the program must redirect frame.
func redirects(frame []byte) bool {
	be := func(off int) int { return int(binary.BigEndian.Uint16(frame[off:])) }
	if len(frame) < 14 {
		return false
	}
	typeAt := 12
	for range 2 {
		if t := be(typeAt); t != 0x8100 && t != 0x88a8 {
			break
		}
		if len(frame) < typeAt+6 {
			return false
		}
		typeAt += 4
	}
	l3 := typeAt + 2
	switch be(typeAt) {
	case 0x8915, 0x8808:
		return true
	case 0x0800:
		if len(frame) < l3+20 {
			return false
		}
		switch {
		case frame[l3+9] == 47:
			return true
		case frame[l3+9] != 17 || be(l3+6)&0x1fff != 0 || frame[l3]&0x0f < 5:
			return false
		}
		udp := l3 + 4*int(frame[l3]&0x0f)
		return len(frame) >= udp+4 && be(udp+2) == 4791
	case 0x86dd:
		if len(frame) < l3+40 {
			return false
		}
		next, at := frame[l3+6], l3+40
		for i := 0; ; i++ {
			switch next {
			case 47:
				return true
			case 17:
				return len(frame) >= at+4 && be(at+2) == 4791
			}
			if i == 6 || len(frame) < at+8 {
				return false
			}
			switch next {
			case 0, 43, 60:
				next, at = frame[at], at+8*(int(frame[at+1])+1)
			case 44:
				if be(at+2)&0xfff8 != 0 {
					return false
				}
				next, at = frame[at], at+8
			default:
				return false
			}
		}
	}
	return false
}

// toHost reports whether frame is addressed to the host whose MAC address
// is mac: to mac, or to a group address.
func toHost(frame []byte, mac net.HardwareAddr) bool {
	return len(frame) >= 6 && (frame[0]&1 != 0 || bytes.Equal(frame[:6], mac))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRedirectsTable checks the Go rule against the hand-made cases, so
// that the fuzz test compares the program with a rule known to be right.
func TestRedirectsTable(t *testing.T) {
	for _, c := range classifyCases {
		if got, want := redirects(c.frame), c.want == counterNoSocket; got != want {
			t.Errorf("%s: redirects = %v, want %v", c.name, got, want)
		}
	}
}

// FuzzClassifyLive runs the program in the kernel on arbitrary frames and
// compares its decision, read from the counters, with the Go rule.
func FuzzClassifyLive(f *testing.F) {
	for _, c := range classifyCases {
		f.Add(c.frame)
	}
	objs := loadForTest(f, rule{host: hostMAC, snapLen: DefaultSnapLen})
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 || len(frame) > 3000 {
			return // BPF_PROG_TEST_RUN takes 14 bytes up to about a page
		}
		before := readCounters(t, objs.Counters)
		ret, err := objs.Program.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		after := readCounters(t, objs.Counters)
		redirected := after[counterNoSocket]-before[counterNoSocket] == 1
		passed := after[counterPassed]-before[counterPassed] == 1
		host := after[counterHost]-before[counterHost] == 1
		if ret != xdpPass || btoi(redirected)+btoi(passed)+btoi(host) != 1 {
			t.Fatalf("verdict %d, counters %v -> %v: not one decision", ret, before, after)
		}
		want := redirects(frame)
		wantHost := want && toHost(frame, hostMAC)
		if redirected != (want && !wantHost) || host != wantHost {
			t.Errorf("frame % x: program redirects = %v, passes to the host = %v; Go rule: matches = %v, to the host = %v", frame, redirected, host, want, wantHost)
		}
	})
}
