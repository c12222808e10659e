package synth_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	iframe "github.com/rocescope/rocescope/internal/frame"
)

// capturesDir holds the real captures of other people (see its README).
const capturesDir = "../../../shared/captures"

// internetSum returns the ones' complement sum of b folded to 16 bits,
// with sum added: 0xffff over a header or segment whose checksum is right.
func internetSum(b []byte, sum uint64) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint64(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint64(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

// TestChecksums checks every IPv4 header checksum, the UDP and TCP
// checksums of the background frames (over the IPv4 or IPv6
// pseudo-header), the zero UDP checksum of RoCE, and the ICRC of every
// RoCE frame.
func TestChecksums(t *testing.T) {
	frames, _ := generate(t, &synth.Config{Seed: 51, Packets: 30_000, OtherShare: 0.2}, 128)
	var v4, segs, icrcs int
	for i := range frames {
		b, p := frames[i].data, &frames[i].p
		if p.Headers&(decode.HasIPv4|decode.HasIPv6) == 0 {
			continue
		}
		ip := 14 + 4*int(p.NumVLAN)
		var l4 int
		var pseudo uint64
		if p.Headers&decode.HasIPv4 != 0 {
			v4++
			if s := internetSum(b[ip:ip+20], 0); s != 0xffff {
				t.Errorf("frame %d: IPv4 header sums to %#x", i+1, s)
			}
			l4 = ip + 20
			pseudo = uint64(internetSum(b[ip+12:ip+20], 0)) + uint64(b[ip+9]) + uint64(int(p.IPLen)-20)
		} else {
			l4 = ip + 40
			pseudo = uint64(internetSum(b[ip+8:ip+40], 0)) + uint64(b[ip+6]) + uint64(p.IPLen)
		}
		end := l4 + int(p.UDPLen)
		if !p.IsRoCE() {
			if p.Headers&decode.HasUDP == 0 {
				end = ip + int(p.IPLen) // TCP over IPv4
				if p.Headers&decode.HasIPv6 != 0 {
					end = l4 + int(p.IPLen)
				}
			}
			if s := internetSum(b[l4:end], pseudo); s != 0xffff {
				t.Errorf("frame %d: UDP or TCP segment sums to %#x", i+1, s)
			}
			segs++
			continue
		}
		if b[l4+6] != 0 || b[l4+7] != 0 {
			t.Errorf("frame %d: RoCE UDP checksum %#x", i+1, b[l4+6:l4+8])
		}
		if got, want := binary.LittleEndian.Uint32(b[end-4:]), iframe.ICRC(b, ip, l4, end-4, p.Headers&decode.HasIPv6 != 0); got != want {
			t.Errorf("frame %d: ICRC %#x, want %#x", i+1, got, want)
		}
		icrcs++
	}
	if v4 == 0 || segs == 0 || icrcs == 0 {
		t.Errorf("checked %d IPv4 headers, %d segments, %d ICRCs", v4, segs, icrcs)
	}
}

// TestICRCRealCaptures checks the ICRC function against the ICRCs that
// real NICs (ConnectX, Soft-RoCE) put in the RoCEv2 frames of the shared
// captures.
func TestICRCRealCaptures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(capturesDir, "*", "*.pcap"))
	if len(files) == 0 {
		t.Skip("no captures in " + capturesDir)
	}
	checked, rewritten := 0, 0
	for _, path := range files {
		if strings.Contains(path, "rdma-ping") {
			// Their frames carry a changing timestamp where the source
			// MAC belongs: the capturing NIC rewrote them, and their last
			// four bytes are not the ICRC of what they show.
			rewritten++
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 || binary.LittleEndian.Uint32(b[20:]) != uint32(decode.LinkEthernet) {
			continue // the corpus's Ethernet captures are little-endian microsecond pcap
		}
		var p decode.Packet
		for off, n := 24, 1; off+16 <= len(b); n++ {
			incl := int(binary.LittleEndian.Uint32(b[off+8:]))
			off += 16
			if off+incl > len(b) {
				t.Fatalf("%s: record %d at offset %d cut short", path, n, off)
			}
			f := b[off : off+incl]
			off += incl
			if p.Decode(f, decode.LinkEthernet) != nil || p.Kind != decode.KindRoCEv2 || p.Headers&decode.HasICRC == 0 {
				continue
			}

			ip := 14 + 4*int(p.NumVLAN)
			l4, v6 := ip+20, p.Headers&decode.HasIPv6 != 0
			if v6 {
				l4 = ip + 40
			}
			end := l4 + int(p.UDPLen) - 4
			if got := iframe.ICRC(f, ip, l4, end, v6); got != p.ICRC && got != binary.LittleEndian.Uint32(f[end:]) {
				t.Errorf("%s: record %d: ICRC %#x, the NIC's %#x", path, n, got, f[end:end+4])
			}
			checked++
		}
	}
	if checked < 500 {
		t.Errorf("checked %d ICRCs", checked)
	}
	t.Logf("checked %d ICRCs of real NICs; skipped %d files of rewritten frames", checked, rewritten)
}

// TestICRCInvariant checks which fields the ICRC covers: changing a
// variant field (IPv4 TOS, TTL and checksum; IPv6 traffic class, flow
// label and hop limit; UDP checksum; the BTH FECN/BECN byte) leaves it
// alone, and changing any other byte changes it.
func TestICRCInvariant(t *testing.T) {
	frames, _ := generate(t, &synth.Config{Seed: 52, Packets: 2000, Flows: 20, IPv6Share: 0.5, VLANShare: synth.Off,
		MaxMessage: 200}, 100)
	seen := map[bool]bool{}
	for i := range frames {
		b, p := frames[i].data, &frames[i].p
		if !p.IsRoCE() || p.Headers&decode.HasICRC == 0 || seen[p.Headers&decode.HasIPv6 != 0] {
			continue
		}
		v6 := p.Headers&decode.HasIPv6 != 0
		seen[v6] = true
		ip, l4 := 14, 34
		variant := map[int]bool{ip + 1: true, ip + 8: true, ip + 10: true, ip + 11: true}
		if v6 {
			l4 = 54
			variant = map[int]bool{ip: true, ip + 1: true, ip + 2: true, ip + 3: true, ip + 7: true}
		}
		variant[l4+6], variant[l4+7], variant[l4+12] = true, true, true
		end := l4 + int(p.UDPLen) - 4
		want := iframe.ICRC(b, ip, l4, end, v6)
		for j := ip; j < end; j++ {
			c := append([]byte(nil), b...)
			c[j] ^= 0x01
			if v6 && j == ip {
				c[j] ^= 0x03 // the low nibble of byte 0 is traffic class; the version nibble is covered
			}
			if got := iframe.ICRC(c, ip, l4, end, v6); (got == want) != variant[j] {
				t.Errorf("IPv6 %v: flipping byte %d (variant %v) gives ICRC %#x, unflipped %#x", v6, j-ip, variant[j], got, want)
			}
		}
		c := append([]byte(nil), b...)
		c[ip] ^= 0x10 // the IP version nibble is covered
		if iframe.ICRC(c, ip, l4, end, v6) == want {
			t.Errorf("IPv6 %v: the version nibble is not covered", v6)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("found RoCE frames over IPv6 %v only", seen)
	}
}

// TestFrameShapes checks what the package doc promises about headers:
// RoCE packets carry the configured DSCP and ECT(0) or CE, CNPs DSCP 48
// and no ECN, tags priority 3 (6 for CNPs), TTL 64, IPv4 don't-fragment,
// P_Key 0xffff, a UDP source port in 0xC000-0xFFFF that both directions
// of a connection share, with the IPv6 flow label; PFC frames go to
// 01:80:c2:00:00:01, enable priority 3 and carry no quanta for the
// priorities they do not enable.
func TestFrameShapes(t *testing.T) {
	frames, tr := generate(t, &synth.Config{Seed: 53, Packets: 30_000, DSCP: 34, IPv6Share: 0.5, PFCShare: 0.02}, 128)
	label := map[dirKey]uint32{}
	var pfc, cnp int
	for i := range frames {
		b, p := frames[i].data, &frames[i].p
		switch {
		case p.Kind == decode.KindPFC:
			pfc++
			if p.DstMAC != [6]byte{0x01, 0x80, 0xc2, 0, 0, 1} || len(b) != 60 || p.Pause.Enable&(1<<3) == 0 || p.Headers&decode.HasVLAN != 0 {
				t.Errorf("frame %d: PFC to %x, %d bytes, enable %#x", i+1, p.DstMAC, len(b), p.Pause.Enable)
			}
			for prio, q := range p.Pause.Quanta {
				if p.Pause.Enable&(1<<prio) == 0 && q != 0 {
					t.Errorf("frame %d: PFC quanta %d for disabled priority %d", i+1, q, prio)
				}
			}
			continue
		case !p.IsRoCE():
			continue
		}
		isCNP := p.BTH.Opcode.IsCNP()
		dscp, pcp := uint8(34), uint8(3)
		if isCNP {
			cnp++
			dscp, pcp = 48, 6
		}
		if p.DSCP != dscp || isCNP && p.ECN != 0 || !isCNP && p.ECN != 2 && p.ECN != 3 || p.TTL != 64 {
			t.Errorf("frame %d: %v with DSCP %d ECN %d TTL %d", i+1, p.BTH.Opcode, p.DSCP, p.ECN, p.TTL)
		}
		if p.Headers&decode.HasVLAN != 0 && p.PCP != pcp {
			t.Errorf("frame %d: %v with priority %d", i+1, p.BTH.Opcode, p.PCP)
		}
		if p.Headers&decode.HasIPv4 != 0 && b[14+4*int(p.NumVLAN)+6] != 0x40 {
			t.Errorf("frame %d: IPv4 flags %#x", i+1, b[14+4*int(p.NumVLAN)+6])
		}
		if p.BTH.PKey != 0xffff || p.SrcPort < 0xc000 {
			t.Errorf("frame %d: P_Key %#x, UDP source port %d", i+1, p.BTH.PKey, p.SrcPort)
		}
		if p.Headers&decode.HasIPv6 != 0 {
			ip := b[14+4*int(p.NumVLAN):]
			fl := binary.BigEndian.Uint32(ip) & 0xfffff
			d := dirOf(p)
			for _, k := range []dirKey{d, d.reverse()} {
				if l, ok := label[k]; ok && l != fl {
					t.Fatalf("frame %d: flow label %#x, the connection's other packets %#x", i+1, fl, l)
				}
			}
			label[d] = fl
		}
	}
	if pfc == 0 || cnp == 0 || len(label) == 0 || uint64(cnp) != tr.Total.CNP {
		t.Errorf("%d PFC frames, %d CNPs, %d IPv6 directions", pfc, cnp, len(label))
	}
}
