package afpacket

import (
	"fmt"
	"strconv"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/rocescope/rocescope/capture/filter"
	"github.com/rocescope/rocescope/decode"
)

// step is one instruction of a classic BPF program under construction:
// label names the instruction as a jump target, and jt and jf name the
// targets of a conditional jump (jt alone that of ja); an empty target
// means the next instruction. Jumps go forward only, as cBPF requires.
type step struct {
	label  string
	code   uint16
	k      uint32
	jt, jf string
	// raw holds the jump offsets of an instruction of an assembled
	// program, whose jumps stay within it (used when rawJumps is set).
	rawJt, rawJf uint8
	rawJumps     bool
}

// assemble resolves the labels of prog into a cBPF program.
func assemble(prog []step) ([]unix.SockFilter, error) {
	at := make(map[string]int, len(prog))
	for i, s := range prog {
		if s.label != "" {
			at[s.label] = i
		}
	}
	// offset returns the jump offset from instruction i to label l.
	offset := func(i int, l string) (uint32, error) {
		if l == "" {
			return 0, nil
		}
		t, ok := at[l]
		if !ok || t <= i {
			return 0, fmt.Errorf("afpacket: filter instruction %d: no forward label %q", i, l)
		}
		return uint32(t - i - 1), nil
	}
	out := make([]unix.SockFilter, len(prog))
	for i, s := range prog {
		jt, err := offset(i, s.jt)
		if err != nil {
			return nil, err
		}
		jf, err := offset(i, s.jf)
		if err != nil {
			return nil, err
		}
		if s.rawJumps {
			out[i] = unix.SockFilter{Code: s.code, Jt: s.rawJt, Jf: s.rawJf, K: s.k}
			continue
		}
		if s.code == ja { // the target goes in k, which has room for any
			out[i] = unix.SockFilter{Code: s.code, K: jt}
			continue
		}
		if jt > 255 || jf > 255 {
			return nil, fmt.Errorf("afpacket: filter instruction %d: jump too far", i)
		}
		out[i] = unix.SockFilter{Code: s.code, Jt: uint8(jt), Jf: uint8(jf), K: s.k}
	}
	return out, nil
}

// Instruction codes the filters use.
const (
	ldhAbs  = unix.BPF_LD | unix.BPF_H | unix.BPF_ABS   // A = 16 bits at [k]
	ldhInd  = unix.BPF_LD | unix.BPF_H | unix.BPF_IND   // A = 16 bits at [X+k]
	ldbInd  = unix.BPF_LD | unix.BPF_B | unix.BPF_IND   // A = 8 bits at [X+k]
	ldxImm  = unix.BPF_LDX | unix.BPF_W | unix.BPF_IMM  // X = k
	ldMem   = unix.BPF_LD | unix.BPF_MEM                // A = M[k]
	st      = unix.BPF_ST                               // M[k] = A
	andK    = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K  // A &= k
	lshK    = unix.BPF_ALU | unix.BPF_LSH | unix.BPF_K  // A <<= k
	addX    = unix.BPF_ALU | unix.BPF_ADD | unix.BPF_X  // A += X
	addK    = unix.BPF_ALU | unix.BPF_ADD | unix.BPF_K  // A += k
	tax     = unix.BPF_MISC | unix.BPF_TAX              // X = A
	txa     = unix.BPF_MISC | unix.BPF_TXA              // A = X
	ja      = unix.BPF_JMP | unix.BPF_JA                // jump to jt
	jeqK    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K  // A == k ? jt : jf
	jsetK   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K // A & k != 0 ? jt : jf
	retK    = unix.BPF_RET | unix.BPF_K                 // accept k bytes (0: drop)
	roceUDP = 4791
)

// maxIPv6ExtHeaders is how many IPv6 extension headers the filter walks,
// as many as the AF_XDP program does: RFC 8200's recommended order has at
// most six before the upper-layer header.
const maxIPv6ExtHeaders = 6

// roceFilter returns the cBPF program that keeps snapLen bytes of the
// frames rocescope analyzes and drops the rest. It sees frames as the
// packet socket receives them: when the kernel has taken the outermost VLAN
// tag out of the frame, the program sees the frame without it, and any
// further tags are still in the data. It accepts, after zero, one or two
// 802.1Q/802.1ad tags left in the data:
//   - ethertype 0x8915 (RoCEv1) and 0x8808 (MAC control: PFC, pause);
//   - IPv4 with protocol 47 (GRE: ERSPAN and GRE mirror traffic), or
//     protocol 17 to destination port 4791 in the first fragment, the UDP
//     header found through the IHL (options allowed);
//   - IPv6 with next header 47, or 17 to destination port 4791, behind up
//     to six hop-by-hop, routing, destination options and fragment headers
//     (a fragment header only at offset 0, whose fragment carries the UDP
//     header); more of them, or another extension header, drop the frame.
//
// A load past the end of the frame drops the frame, so truncated headers
// are rejected.
//
// The X register holds the offset, less 14, of the header being looked
// at; scratch word M[0] keeps an IPv6 next header while X moves on.
//
// keep is the code that runs for a frame the filter keeps, a program of
// its own that returns how many bytes to keep: keepAll(snapLen), or a user's
// expression (exprSteps).
func roceFilter(keep []step) ([]unix.SockFilter, error) {
	prog := []step{
		{code: ldxImm, k: 0},                               // X = bytes of VLAN tags before the ethertype: none yet
		{code: ldhAbs, k: 12},                              // A = ethertype or TPID after the MAC addresses
		{code: jeqK, k: 0x8100, jt: "tag1"},                // 802.1Q tag?
		{code: jeqK, k: 0x88a8, jt: "tag1", jf: "type"},    // 802.1ad tag? otherwise A is the ethertype
		{label: "tag1", code: ldxImm, k: 4},                // X = one tag
		{code: ldhAbs, k: 16},                              // A = the type after the first tag
		{code: jeqK, k: 0x8100, jt: "tag2"},                // second tag?
		{code: jeqK, k: 0x88a8, jt: "tag2", jf: "type"},    //
		{label: "tag2", code: ldxImm, k: 8},                // X = two tags
		{code: ldhAbs, k: 20},                              // A = the type after the second tag
		{label: "type", code: jeqK, k: 0x8915, jt: "keep"}, // RoCEv1
		{code: jeqK, k: 0x8808, jt: "keep"},                // MAC control (PFC, pause)
		{code: jeqK, k: 0x0800, jt: "ipv4"},                // IPv4
		{code: jeqK, k: 0x86dd, jf: "drop"},                // IPv6, or nothing we want
		{code: ldbInd, k: 14 + 6},                          // A = IPv6 next header
		{code: st, k: 0},                                   // M[0] = next header
		{code: txa},                                        //
		{code: addK, k: 40},                                //
		{code: tax},                                        // X = offset of the next header less 14
		{code: ldMem, k: 0},                                // A = next header
	}
	for i := range maxIPv6ExtHeaders {
		prog = append(prog, ipv6ExtHeader(i)...)
	}
	prog = append(prog,
		step{label: extLabel(maxIPv6ExtHeaders), code: jeqK, k: unix.IPPROTO_GRE, jt: "keep"},
		step{code: jeqK, k: unix.IPPROTO_UDP, jt: "udp", jf: "drop"},
		step{label: "ipv4", code: ldbInd, k: 14 + 9},         // A = IPv4 protocol
		step{code: jeqK, k: unix.IPPROTO_GRE, jt: "keep"},    // GRE mirror traffic
		step{code: jeqK, k: unix.IPPROTO_UDP, jf: "drop"},    // anything but UDP: drop
		step{code: ldhInd, k: 14 + 6},                        // A = flags and fragment offset
		step{code: jsetK, k: 0x1fff, jt: "drop"},             // not the first fragment: no UDP header
		step{code: ldbInd, k: 14},                            // A = version and IHL
		step{code: andK, k: 0x0f},                            // A = IHL (32-bit words)
		step{code: lshK, k: 2},                               // A = IPv4 header bytes
		step{code: addX},                                     // A += tag bytes
		step{code: tax},                                      // X = offset of the UDP header less 14
		step{label: "udp", code: ldhInd, k: 14 + 2},          // A = UDP destination port
		step{code: jeqK, k: roceUDP, jt: "keep", jf: "drop"}, // RoCEv2?
		step{label: "drop", code: retK, k: 0},                // drop
	)
	keep[0].label = "keep"
	return assemble(append(prog, keep...))
}

// keepAll is the code that keeps snapLen bytes of every frame.
func keepAll(snapLen uint32) []step { return []step{{code: retK, k: snapLen}} }

// exprSteps returns the user's expression compiled for frames of link
// type link, as code that keeps snapLen bytes of the frames it matches
// and drops the others.
func exprSteps(e *filter.Expr, link decode.LinkType, snapLen uint32) ([]step, error) {
	insns, err := e.Instructions(link)
	if err != nil {
		return nil, err
	}
	for i, in := range insns {
		if r, ok := in.(bpf.RetConstant); ok && r.Val > 0 {
			insns[i] = bpf.RetConstant{Val: snapLen}
		}
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("afpacket: filter %q: %w", e, err)
	}
	steps := make([]step, len(raw))
	for i, r := range raw {
		steps[i] = step{code: r.Op, k: r.K, rawJt: r.Jt, rawJf: r.Jf, rawJumps: true}
	}
	return steps, nil
}

// extLabel names the instructions that look at the next header after i
// IPv6 extension headers.
func extLabel(i int) string { return "ext" + strconv.Itoa(i) }

// ipv6ExtHeader looks at the IPv6 next header in A, whose header starts at
// X+14: GRE is kept, UDP goes on to the port check, an extension header is
// skipped (a fragment only at offset 0), leaving its next header in A and
// X on the following header. Anything else is dropped.
func ipv6ExtHeader(i int) []step {
	options, fragment, next := extLabel(i)+"_options", extLabel(i)+"_fragment", extLabel(i+1)
	return []step{
		{label: extLabel(i), code: jeqK, k: unix.IPPROTO_GRE, jt: "keep"},
		{code: jeqK, k: unix.IPPROTO_UDP, jt: "udp"},
		{code: jeqK, k: unix.IPPROTO_HOPOPTS, jt: options},
		{code: jeqK, k: unix.IPPROTO_ROUTING, jt: options},
		{code: jeqK, k: unix.IPPROTO_DSTOPTS, jt: options},
		{code: jeqK, k: unix.IPPROTO_FRAGMENT, jt: fragment, jf: "drop"},
		{label: options, code: ldbInd, k: 14},      // A = next header
		{code: st, k: 0},                           // M[0] = next header
		{code: ldbInd, k: 14 + 1},                  // A = length in 8-byte units, less one
		{code: addK, k: 1},                         //
		{code: lshK, k: 3},                         // A = header bytes
		{code: addX},                               //
		{code: tax},                                // X = offset of the following header less 14
		{code: ldMem, k: 0},                        // A = next header
		{code: ja, jt: next},                       //
		{label: fragment, code: ldhInd, k: 14 + 2}, // A = fragment offset and flags
		{code: jsetK, k: 0xfff8, jt: "drop"},       // not the first fragment: no UDP header
		{code: ldbInd, k: 14},                      // A = next header
		{code: st, k: 0},                           // M[0] = next header
		{code: txa},                                //
		{code: addK, k: 8},                         //
		{code: tax},                                // X = offset of the following header less 14
		{code: ldMem, k: 0},                        // A = next header
	}
}

// snapFilter returns the one-instruction program that keeps snapLen bytes
// of every frame.
func snapFilter(snapLen uint32) []unix.SockFilter {
	return []unix.SockFilter{{Code: retK, K: snapLen}}
}
