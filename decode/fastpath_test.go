package decode

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// fastPathSeeds are frames of the shapes the fast path takes, and near
// misses: IPv4 options, a UDP length beyond the IP payload, two 802.1Q
// tags, an IPv6 extension header.
var fastPathSeeds = []string{
	// RoCEv2 RC Acknowledge (NAK).
	"02000000000b02000000000a0800 450200301234400040110000 0a0000010a000002 c00012b7001c0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
	// RC RDMA WRITE First with RETH and 4 payload bytes.
	"02000000000b02000000000a0800 450200481234400040110000 0a0000010a000002 c00012b700340000 0640ffff00abcdef00000001 00007f0012345678 1234abcd 00002000 01020304 a1b2c3d4",
	// IPv4 with options: not the fast path.
	"02000000000b02000000000a0800 460200341234400040110000 0a0000010a000002 94040000 c00012b7001c0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
	// UDP length beyond the IP payload.
	"02000000000b02000000000a0800 450200301234400040110000 0a0000010a000002 c00012b7001d0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
	// The NAK behind an 802.1Q tag (priority 3, VLAN 100).
	"02000000000b02000000000a8100 6064 0800 450200301234400040110000 0a0000010a000002 c00012b7001c0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
	// The NAK over IPv6 (ECN 2).
	"02000000000b02000000000a86dd 60200000001c1140 fd000000000000000000000000000001 fd000000000000000000000000000002 " +
		"c00012b7001c0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
	// The WRITE First behind a tag, over IPv6.
	"02000000000b02000000000a8100 6064 86dd 6020000000341140 fd000000000000000000000000000001 fd000000000000000000000000000002 " +
		"c00012b700340000 0640ffff00abcdef00000001 00007f0012345678 1234abcd 00002000 01020304 a1b2c3d4",
	// Two tags (802.1ad, then 802.1Q): not the fast path.
	"02000000000b02000000000a88a8 0064 8100 6064 0800 450200301234400040110000 0a0000010a000002 c00012b7001c0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
	// IPv6 with a hop-by-hop options header: not the fast path.
	"02000000000b02000000000a86dd 6020000000240040 fd000000000000000000000000000001 fd000000000000000000000000000002 " +
		"1100000000000000 c00012b7001c0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
}

func unhexSeed(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// TestFastPathTaken guards the benchmarks: the common frame must take the
// fast path, and frames of other shapes must not.
func TestFastPathTaken(t *testing.T) {
	// Whether the fast path takes each seed, and whether it is a valid
	// RoCEv2 frame (the general path decodes it without error).
	for i, want := range []struct{ fast, valid bool }{
		{true, true}, {true, true}, {false, true}, {false, false},
		{true, true}, {true, true}, {true, true}, {false, true}, {false, true},
	} {
		var p, general Packet
		frame := unhexSeed(fastPathSeeds[i])
		if _, ok := p.fastRoCEv2(frame, DefaultRoCEPort); ok != want.fast {
			t.Errorf("seed %d: fast path %v, want %v", i, ok, want.fast)
		}
		e := general.ethernet(frame, DefaultRoCEPort)
		if valid := e == 0 && general.Kind == KindRoCEv2 && general.BTH.DestQP != 0; valid != want.valid {
			t.Errorf("seed %d: general path: %v, kind %v, dest QP %#x; valid %v, want %v", i, e, general.Kind, general.BTH.DestQP, valid, want.valid)
		}
	}
}

// FuzzFastPath checks that whenever the fixed-offset fast path takes a
// frame, it decodes it exactly as the general path does.
func FuzzFastPath(f *testing.F) {
	for _, s := range fastPathSeeds {
		f.Add(unhexSeed(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var fast, general Packet
		e1, ok := fast.fastRoCEv2(frame, DefaultRoCEPort)
		if !ok {
			if !reflect.DeepEqual(fast, Packet{}) {
				t.Fatalf("fast path declined the frame but wrote %+v", fast)
			}
			return
		}
		e2 := general.ethernet(frame, DefaultRoCEPort)
		if e1 != e2 || !reflect.DeepEqual(fast, general) {
			t.Fatalf("fast path: %v %+v\ngeneral path: %v %+v", e1, fast, e2, general)
		}
	})
}

// TestOpcodeTable checks the table's derived lengths against the header
// lengths, and that extension headers are only the ethHeaders bits.
func TestOpcodeTable(t *testing.T) {
	for i, op := range opcodes {
		if op.svc == ServiceNone {
			if op != (opInfo{}) {
				t.Errorf("opcode %#02x: invalid but has %+v", i, op)
			}
			continue
		}
		if op.eth&^ethHeaders != 0 || int(op.hlen) != lenBTH+int(op.skip)+ethLen(op.eth) {
			t.Errorf("opcode %#02x: %+v", i, op)
		}
	}
}
