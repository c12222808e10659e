package synth_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/tsharktest"
)

// writePcap writes frames as a classic little-endian pcap file with
// nanosecond timestamps (magic a1b23c4d) and Ethernet link type, written
// here so that the test depends on no other package of the project.
func writePcap(tb testing.TB, path string, frames []frame) {
	tb.Helper()
	var b bytes.Buffer
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], 0xa1b23c4d)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 262144)
	binary.LittleEndian.PutUint32(h[20:], 1)
	b.Write(h[:])
	for _, f := range frames {
		var r [16]byte
		binary.LittleEndian.PutUint32(r[0:], uint32(f.time/1e9))
		binary.LittleEndian.PutUint32(r[4:], uint32(f.time%1e9))
		binary.LittleEndian.PutUint32(r[8:], uint32(len(f.data)))
		binary.LittleEndian.PutUint32(r[12:], f.origLen)
		b.Write(r[:])
		b.Write(f.data)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// tshark runs tshark with args over path and returns its output lines;
// tsharktest caches the output.
// The ports of the background traffic (20000-29999) are decoded as plain
// data: Wireshark would otherwise hand the text payloads to whatever
// protocol registered a port, and dissect datagrams from port 4791 as
// RoCE (it tries the lower port first), while RoCEv2 is defined by the
// destination port alone.
func tshark(tb testing.TB, path string, args ...string) [][]string {
	tb.Helper()
	out, err := tsharktest.Run(tb, path, append([]string{"--disable-protocol", "rpcordma",
		"-d", "udp.port==20000-29999,data", "-d", "tcp.port==20000-29999,data",
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"}, args...)...)
	if err != nil {
		tb.Fatalf("tshark %v: %v", args, err)
	}
	var lines [][]string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lines = append(lines, strings.Split(sc.Text(), "\t"))
	}
	return lines
}

// ipoibMisread reports whether Wireshark, showing protocols, took the
// start of the RDMA payload of f for an IPoIB header: when the payload's
// third and fourth bytes (pad included) are zero, Wireshark 4.0 reads the
// first two as an ethertype and hands the rest to that protocol, which
// then finds it malformed. Payloads of one or two bytes, whose pad is
// zero, meet the condition whenever their first byte starts a known
// ethertype (0x06 IDP, 0x08 IPv4, ...).
func ipoibMisread(f *frame, protocols string) bool {
	p := &f.p
	if !p.IsRoCE() || !strings.Contains(protocols, ":infiniband:ethertype") || p.PayloadLen == 0 {
		return false
	}
	end := udpOffset(p) + int(p.UDPLen) - 4 // the ICRC
	start := end - int(p.BTH.PadCnt) - int(p.PayloadLen)
	return end-start >= 4 && f.data[start+2] == 0 && f.data[start+3] == 0
}

// Wireshark's checksum status values.
const (
	checksumGood       = "1"
	checksumNotPresent = "3"
	checksumIllegal    = "4"
)

// TestTshark writes a trace (whole frames and cut ones) and has Wireshark
// read it: no frame is malformed, the frame count, lengths and times agree,
// the BTH opcode counts of the frames to UDP port 4791 equal the truth's,
// every RoCE header field Wireshark shows equals the decoder's, and every
// IPv4, UDP and TCP checksum is good, but for the zero UDP checksum RoCEv2
// sends (which Wireshark calls illegal over IPv6).
func TestTshark(t *testing.T) {
	tsharktest.Require(t)
	if testing.Short() {
		t.Skip("tshark comparison skipped in short mode")
	}
	for _, tc := range []struct {
		name         string
		snap, erspan int
	}{{"whole", 0, 0}, {"snap", synth.MinSnapLen, 0}, {"erspan3", 0, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			frames, tr := generate(t, &synth.Config{Seed: 61, Packets: 20_000, OtherShare: 0.05, PFCShare: 0.01,
				ECNCEProb: 0.03, LossProb: 0.005, RNRProb: 0.02, SnapLen: tc.snap, ERSPAN: tc.erspan}, 512)
			path := filepath.Join(t.TempDir(), "synth.pcap")
			writePcap(t, path, frames)
			for _, l := range tshark(t, path, "-Y", "_ws.malformed", "-e", "frame.number", "-e", "frame.protocols") {
				n, _ := strconv.Atoi(l[0])
				if n < 1 || n > len(frames) || !ipoibMisread(&frames[n-1], l[1]) {
					t.Errorf("tshark finds frame %v malformed", l)
				}
			}
			lines := tshark(t, path, "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
				"-o", "tcp.check_checksum:TRUE", "-e", "frame.number", "-e", "frame.len", "-e", "frame.cap_len",
				"-e", "frame.time_epoch", "-e", "udp.dstport", "-e", "infiniband.bth.opcode", "-e", "ip.checksum.status",
				"-e", "udp.checksum.status", "-e", "tcp.checksum.status")
			if len(lines) != len(frames) {
				t.Fatalf("tshark reads %d frames, wrote %d", len(lines), len(frames))
			}
			ops := map[uint8]uint64{}
			for i, l := range lines {
				f := &frames[i]
				if l[0] != strconv.Itoa(i+1) || l[1] != strconv.Itoa(int(f.origLen)) || l[2] != strconv.Itoa(len(f.data)) {
					t.Fatalf("frame %d: tshark shows number %s, length %s, captured %s", i+1, l[0], l[1], l[2])
				}
				if want := strconv.FormatInt(f.time/1e9, 10) + "." + strconv.FormatInt(1e9+f.time%1e9, 10)[1:]; l[3] != want {
					t.Fatalf("frame %d: time %s, want %s", i+1, l[3], want)
				}
				roce := l[4] == "4791"
				if roce {
					op, err := strconv.ParseUint(l[5], 10, 8)
					if err != nil {
						t.Fatalf("frame %d: opcode %q: %v", i+1, l[5], err)
					}
					ops[uint8(op)]++
				}
				if l[6] != "" && l[6] != checksumGood {
					t.Errorf("frame %d: IPv4 checksum status %s", i+1, l[6])
				}
				udp, tcp := l[7], l[8]
				switch {
				case roce && udp != checksumNotPresent && udp != checksumIllegal:
					t.Errorf("frame %d: RoCE UDP checksum status %s", i+1, udp)
				case !roce && tc.snap == 0 && (udp != "" && udp != checksumGood || tcp != "" && tcp != checksumGood):
					t.Errorf("frame %d: UDP checksum status %q, TCP %q", i+1, udp, tcp)
				}
			}
			if tc.erspan == 0 { // the first IP header of a mirrored frame is the outer one
				compareFields(t, path, frames)
			}
			if d := gocmp.Diff(tr.Total.Opcodes, ops); d != "" {
				t.Errorf("opcode counts (-truth +tshark):\n%s", d)
			}
			if len(ops) < 15 {
				t.Errorf("only %d opcodes: %v", len(ops), ops)
			}
		})
	}
}

// tsharkFields are the RoCE fields compared frame by frame with the
// decoder's reading of the same bytes, and how to read each from a
// decoded packet (ok false: the field must be absent).
var tsharkFields = []struct {
	name string
	get  func(p *decode.Packet) (v uint64, ok bool)
}{
	{"infiniband.bth.opcode", func(p *decode.Packet) (uint64, bool) { return uint64(p.BTH.Opcode), true }},
	{"infiniband.bth.psn", func(p *decode.Packet) (uint64, bool) { return uint64(p.BTH.PSN), true }},
	{"infiniband.bth.destqp", func(p *decode.Packet) (uint64, bool) { return uint64(p.BTH.DestQP), true }},
	{"infiniband.bth.padcnt", func(p *decode.Packet) (uint64, bool) { return uint64(p.BTH.PadCnt), true }},
	{"infiniband.bth.a", func(p *decode.Packet) (uint64, bool) { return b2u(p.BTH.AckReq), true }},
	{"infiniband.bth.se", func(p *decode.Packet) (uint64, bool) { return b2u(p.BTH.SE), true }},
	{"infiniband.bth.m", func(p *decode.Packet) (uint64, bool) { return b2u(p.BTH.M), true }},
	{"infiniband.bth.p_key", func(p *decode.Packet) (uint64, bool) { return uint64(p.BTH.PKey), true }},
	{"infiniband.reth.dmalen", func(p *decode.Packet) (uint64, bool) { return uint64(p.RETH.DMALen), p.Headers&decode.HasRETH != 0 }},
	{"infiniband.reth.va", func(p *decode.Packet) (uint64, bool) { return p.RETH.VA, p.Headers&decode.HasRETH != 0 }},
	{"infiniband.reth.r_key", func(p *decode.Packet) (uint64, bool) { return uint64(p.RETH.RKey), p.Headers&decode.HasRETH != 0 }},
	{"infiniband.aeth.syndrome", func(p *decode.Packet) (uint64, bool) { return uint64(p.AETH.Syndrome), p.Headers&decode.HasAETH != 0 }},
	{"infiniband.aeth.msn", func(p *decode.Packet) (uint64, bool) { return uint64(p.AETH.MSN), p.Headers&decode.HasAETH != 0 }},
	{"infiniband.immdt", func(p *decode.Packet) (uint64, bool) { return uint64(p.ImmDt), p.Headers&decode.HasImmDt != 0 }},
	{"infiniband.invariant.crc", func(p *decode.Packet) (uint64, bool) {
		return uint64(p.ICRC), !p.BTH.Opcode.IsCNP() // Wireshark 4.0 does not know the CNP's layout
	}},
	{"ip.dsfield.ecn", func(p *decode.Packet) (uint64, bool) { return uint64(p.ECN), p.Headers&decode.HasIPv4 != 0 }},
	{"ipv6.tclass.ecn", func(p *decode.Packet) (uint64, bool) { return uint64(p.ECN), p.Headers&decode.HasIPv6 != 0 }},
	{"vlan.id", func(p *decode.Packet) (uint64, bool) { return uint64(p.VLANs[0]), p.Headers&decode.HasVLAN != 0 }},
}

// b2u returns 1 for true.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// compareFields compares the RoCE header fields Wireshark shows for every
// frame to UDP port 4791 with the decoder's.
func compareFields(t *testing.T, path string, frames []frame) {
	t.Helper()
	args := []string{"-e", "udp.dstport", "-e", "frame.protocols"}
	for _, f := range tsharkFields {
		args = append(args, "-e", f.name)
	}
	lines := tshark(t, path, args...)
	bad := 0
	for i, l := range lines {
		p := &frames[i].p
		if l[0] != "4791" {
			continue
		}
		for j, f := range tsharkFields {
			want, ok := f.get(p)
			if f.name == "infiniband.invariant.crc" && (p.Headers&decode.HasICRC == 0 || ipoibMisread(&frames[i], l[1])) {
				ok = false // cut off by the snap length, or not reached by Wireshark
			}
			got := l[2+j]
			if !ok {
				if got != "" {
					t.Errorf("frame %d: tshark shows %s = %s, the decoder does not", i+1, f.name, got)
					bad++
				}
				continue
			}
			base := 10
			if strings.HasPrefix(got, "0x") {
				got, base = got[2:], 16
			} else if f.name == "infiniband.immdt" {
				base = 16
			}
			v, err := strconv.ParseUint(got, base, 64)
			if err != nil || v != want {
				t.Errorf("frame %d: tshark shows %s = %q, the decoder %d", i+1, f.name, l[2+j], want)
				bad++
			}
		}
		if bad > 20 {
			t.Fatal("too many differences")
		}
	}
}
