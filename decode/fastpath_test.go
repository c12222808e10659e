package decode

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// fastPathSeeds are frames of the shape the fast path takes, and near
// misses: IPv4 options, a fragment, another port, a short UDP length.
var fastPathSeeds = []string{
	// RoCEv2 RC Acknowledge (NAK).
	"02000000000b02000000000a0800 450200301234400040110000 0a0000010a000002 c00012b7001c0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
	// RC RDMA WRITE First with RETH and 4 payload bytes.
	"02000000000b02000000000a0800 450200481234400040110000 0a0000010a000002 c00012b700340000 0640ffff00abcdef00000001 00007f0012345678 1234abcd 00002000 01020304 a1b2c3d4",
	// IPv4 with options: not the fast path.
	"02000000000b02000000000a0800 460200341234400040110000 0a0000010a000002 94040000 c00012b7001c0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
	// UDP length beyond the IP payload.
	"02000000000b02000000000a0800 450200301234400040110000 0a0000010a000002 c00012b7001d0000 1140ffff00000041000003e8 6000004d a1b2c3d4",
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
	for i, want := range []bool{true, true, false, false} {
		var p Packet
		if _, ok := p.fastRoCEv2(unhexSeed(fastPathSeeds[i]), DefaultRoCEPort); ok != want {
			t.Errorf("seed %d: fast path %v, want %v", i, ok, want)
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
