package afxdp

import (
	"encoding/binary"
	"errors"
	"net"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Names of the program and its maps in the collection.
const (
	programName     = "rocescope_xdp"
	xsksMapName     = "xsks_map"
	countersMapName = "counters"
)

// Indices of the counters map, a per-CPU array of uint64.
const (
	counterRedirected = iota // redirected to a socket
	counterNoSocket          // matched, but no socket on the queue: passed
	counterPassed            // not matched: passed
	counterHost              // matched, but addressed to this host: passed
	numCounters
)

// XDP actions (enum xdp_action).
const (
	xdpPass     = 2
	xdpRedirect = 4
)

// Offsets of the fields of struct xdp_md, the program's context.
const (
	xdpMDData         = 0
	xdpMDDataEnd      = 4
	xdpMDDataMeta     = 8
	xdpMDRxQueueIndex = 16
)

// The metadata the program writes in front of every frame it redirects,
// which the kernel copies into the UMEM frame just before the frame's
// bytes: 16 bytes in host byte order.
const (
	metaLen     = 16
	metaTime    = 0  // uint64: bpf_ktime_get_ns() (CLOCK_MONOTONIC) when the program ran
	metaWireLen = 8  // uint32: the frame's length before the program trimmed it
	metaMagic   = 12 // uint32: metaMagicValue, which the reader clears after use
	// metaMagicValue marks metadata the program wrote ("rsm1"), as opposed
	// to whatever bytes precede a frame redirected without metadata.
	metaMagicValue = 0x72736d31
)

// Header facts the program matches on.
const (
	etherTypeVLAN   = 0x8100
	etherTypeQinQ   = 0x88a8
	etherTypeIPv4   = 0x0800
	etherTypeIPv6   = 0x86dd
	etherTypeRoCEv1 = 0x8915
	etherTypePause  = 0x8808 // MAC control: 802.3x pause and PFC
	protoGRE        = 47
	protoUDP        = 17
	portRoCEv2      = 4791

	// IPv6 extension headers the program walks (RFC 8200): hop-by-hop
	// options, routing, fragment and destination options.
	protoHopByHop = 0
	protoRouting  = 43
	protoFragment = 44
	protoDestOpts = 60
)

// maxIPv6ExtHeaders is how many IPv6 extension headers the program walks
// before it gives up on a frame and passes it: RFC 8200's recommended order
// has at most six before the upper-layer header (hop-by-hop, destination
// options, routing, fragment, authentication, destination options), of
// which the authentication header is not walked.
const maxIPv6ExtHeaders = 6

// license is the program's license string. The program calls no GPL-only
// helper; the kernel requires some string and accepts any.
const license = "Dual MIT/GPL"

// Labels of jump targets.
const (
	labelL3       = "l3"
	labelIPv6     = "ipv6"
	labelUDP      = "udp"
	labelPass     = "pass"
	labelRedirect = "redirect"
	labelTake     = "take"
	labelHost     = "host"
	labelSend     = "send"
	labelCount    = "count"
	labelReturn   = "return"
)

// Register use: R6 holds the context, R7 is the cursor (it points at the
// EtherType field in effect, so the next header starts at R7+2), R8 is
// data_end and R9 the verdict. R2 and R3 are scratch.

// rule says which frames the program takes.
type rule struct {
	all bool // every frame, not only RoCEv2, RoCEv1, GRE and MAC control frames
	// host is the interface's MAC address: a frame addressed to it, or to a
	// group address (broadcast, multicast), is passed to the kernel, for
	// the host to receive, instead of taken. Nil takes those frames too.
	host    net.HardwareAddr
	snapLen uint32 // frames taken are cut to this many bytes
}

// program returns the XDP program. With r.all set it redirects every
// frame; otherwise RoCEv2, RoCEv1, GRE and PFC/pause frames as the package
// documentation describes, and passes the rest. Of those, it passes the
// frames addressed to r.host (see hostCheck). Frames it redirects carry
// metadata and are cut to r.snapLen bytes (see redirectAndCount).
func program(r rule) asm.Instructions {
	insns := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}
	if !r.all {
		insns = append(insns, classify()...)
		insns = append(insns, vlanTag("tag1")...)
		insns = append(insns, vlanTag("tag2")...)
		insns = append(insns, network()...)
		insns = append(insns,
			asm.StoreImm(asm.R10, -4, counterPassed, asm.Word).WithSymbol(labelPass),
			asm.Mov.Imm(asm.R9, xdpPass),
			asm.Ja.Label(labelCount),
		)
	}
	take := redirectAndCount(r.snapLen)
	if r.host == nil {
		take[0] = take[0].WithSymbol(labelRedirect)
		return append(insns, take...)
	}
	take[0] = take[0].WithSymbol(labelTake)
	insns = append(insns, hostCheck(r.host)...)
	return append(insns, take...)
}

// hostCheck passes a frame the host receives, one addressed to the
// interface's MAC address mac or to a group address (broadcast,
// multicast), and counts it in counterHost; it goes on to take every other
// frame, such as a mirror port's, which is addressed to other hosts. A
// frame shorter than a MAC address is taken.
func hostCheck(mac net.HardwareAddr) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R6, xdpMDData, asm.Word).WithSymbol(labelRedirect),
		asm.LoadMem(asm.R3, asm.R6, xdpMDDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 6),
		asm.JGT.Reg(asm.R4, asm.R3, labelTake),
		asm.LoadMem(asm.R4, asm.R2, 0, asm.Byte),
		asm.JSet.Imm(asm.R4, 1, labelHost), // the group bit
		asm.LoadMem(asm.R4, asm.R2, 0, asm.Word),
		asm.Mov.Imm32(asm.R5, int32(binary.NativeEndian.Uint32(mac[0:4]))),
		asm.JNE.Reg(asm.R4, asm.R5, labelTake),
		asm.LoadMem(asm.R4, asm.R2, 4, asm.Half),
		asm.JNE.Imm(asm.R4, int32(binary.NativeEndian.Uint16(mac[4:6])), labelTake),
		asm.StoreImm(asm.R10, -4, counterHost, asm.Word).WithSymbol(labelHost),
		asm.Mov.Imm(asm.R9, xdpPass),
		asm.Ja.Label(labelCount),
	}
}

// ensure emits a check that n bytes from the cursor are inside the packet
// and a jump to pass when they are not.
func ensure(n int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R3, asm.R7),
		asm.Add.Imm(asm.R3, n),
		asm.JGT.Reg(asm.R3, asm.R8, labelPass),
	}
}

// loadBE16 loads the big-endian 16-bit field at the cursor plus off into dst
// in host order.
func loadBE16(dst asm.Register, off int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(dst, asm.R7, off, asm.Half),
		asm.HostTo(asm.BE, dst, asm.Half),
	}
}

// classify loads data and data_end, checks the Ethernet header and leaves
// the EtherType in R2 with the cursor on it.
func classify() asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R7, asm.R6, xdpMDData, asm.Word),
		asm.LoadMem(asm.R8, asm.R6, xdpMDDataEnd, asm.Word),
	}
	insns = append(insns, ensure(14)...)
	insns = append(insns, asm.Add.Imm(asm.R7, 12))
	return append(insns, loadBE16(asm.R2, 0)...)
}

// vlanTag skips one VLAN tag when the EtherType in R2 is 0x8100 or 0x88a8,
// leaving the inner EtherType in R2.
func vlanTag(label string) asm.Instructions {
	insns := asm.Instructions{
		asm.JEq.Imm(asm.R2, etherTypeVLAN, label),
		asm.JNE.Imm(asm.R2, etherTypeQinQ, labelL3),
	}
	tag := ensure(6) // EtherType, TCI, inner EtherType
	tag[0] = tag[0].WithSymbol(label)
	insns = append(insns, tag...)
	insns = append(insns, loadBE16(asm.R2, 4)...)
	return append(insns, asm.Add.Imm(asm.R7, 4))
}

// network matches on the EtherType in R2, then on the IPv4 or IPv6 header
// and the UDP destination port.
func network() asm.Instructions {
	insns := asm.Instructions{
		asm.JEq.Imm(asm.R2, etherTypeRoCEv1, labelRedirect).WithSymbol(labelL3),
		asm.JEq.Imm(asm.R2, etherTypePause, labelRedirect),
		asm.JEq.Imm(asm.R2, etherTypeIPv6, labelIPv6),
		asm.JNE.Imm(asm.R2, etherTypeIPv4, labelPass),
	}
	// IPv4: the header starts at R7+2; 20 bytes at least.
	insns = append(insns, ensure(2+20)...)
	insns = append(insns,
		asm.LoadMem(asm.R2, asm.R7, 2+9, asm.Byte), // protocol
		asm.JEq.Imm(asm.R2, protoGRE, labelRedirect),
		asm.JNE.Imm(asm.R2, protoUDP, labelPass),
	)
	// A fragment other than the first carries no UDP header.
	insns = append(insns, loadBE16(asm.R2, 2+6)...)
	insns = append(insns,
		asm.And.Imm(asm.R2, 0x1fff),
		asm.JNE.Imm(asm.R2, 0, labelPass),
		asm.LoadMem(asm.R3, asm.R7, 2, asm.Byte), // version and IHL
		asm.And.Imm(asm.R3, 0x0f),
		asm.LSh.Imm(asm.R3, 2),
		asm.JLT.Imm(asm.R3, 20, labelPass),
		asm.Add.Reg(asm.R7, asm.R3), // the UDP header starts at R7+2
		asm.Ja.Label(labelUDP),
	)
	// IPv6: fixed 40-byte header, then extension headers, then UDP.
	ipv6 := ensure(2 + 40)
	ipv6[0] = ipv6[0].WithSymbol(labelIPv6)
	insns = append(insns, ipv6...)
	insns = append(insns,
		asm.LoadMem(asm.R2, asm.R7, 2+6, asm.Byte), // next header
		asm.Add.Imm(asm.R7, 40),
	)
	for i := range maxIPv6ExtHeaders {
		insns = append(insns, ipv6ExtHeader(i)...)
	}
	insns = append(insns,
		asm.JEq.Imm(asm.R2, protoGRE, labelRedirect).WithSymbol(extLabel(maxIPv6ExtHeaders)),
		asm.JNE.Imm(asm.R2, protoUDP, labelPass),
	)
	return append(insns, udpPort()...)
}

// extLabel names the instructions that look at the next header after i
// IPv6 extension headers.
func extLabel(i int) string { return "ext" + strconv.Itoa(i) }

// ipv6ExtHeader looks at the IPv6 next header in R2, whose header starts at
// R7+2: GRE redirects, UDP goes on to the port check, an extension header
// is skipped (a fragment only if it is the first, which carries the UDP
// header), leaving its next header in R2 and the cursor before the
// following header. Anything else is passed.
func ipv6ExtHeader(i int) asm.Instructions {
	options, next := extLabel(i)+"_options", extLabel(i+1)
	insns := asm.Instructions{
		asm.JEq.Imm(asm.R2, protoGRE, labelRedirect).WithSymbol(extLabel(i)),
		asm.JEq.Imm(asm.R2, protoUDP, labelUDP),
		asm.JEq.Imm(asm.R2, protoHopByHop, options),
		asm.JEq.Imm(asm.R2, protoRouting, options),
		asm.JEq.Imm(asm.R2, protoDestOpts, options),
		asm.JNE.Imm(asm.R2, protoFragment, labelPass),
	}
	// Fragment: 8 bytes; a fragment offset other than 0 carries no UDP header.
	insns = append(insns, ensure(2+8)...)
	insns = append(insns, loadBE16(asm.R3, 2+2)...)
	insns = append(insns,
		asm.And.Imm(asm.R3, 0xfff8),
		asm.JNE.Imm(asm.R3, 0, labelPass),
		asm.LoadMem(asm.R2, asm.R7, 2, asm.Byte),
		asm.Add.Imm(asm.R7, 8),
		asm.Ja.Label(next),
	)
	// Options and routing: (length field + 1) * 8 bytes, 8 at least.
	opts := ensure(2 + 8)
	opts[0] = opts[0].WithSymbol(options)
	insns = append(insns, opts...)
	return append(insns,
		asm.LoadMem(asm.R3, asm.R7, 2+1, asm.Byte),
		asm.Add.Imm(asm.R3, 1),
		asm.LSh.Imm(asm.R3, 3),
		asm.LoadMem(asm.R2, asm.R7, 2, asm.Byte),
		asm.Add.Reg(asm.R7, asm.R3),
	)
}

// udpPort checks the UDP destination port of the header at R7+2 and
// jumps to redirect or pass.
func udpPort() asm.Instructions {
	insns := ensure(2 + 4)
	insns[0] = insns[0].WithSymbol(labelUDP)
	insns = append(insns, loadBE16(asm.R2, 2+2)...)
	return append(insns,
		asm.JEq.Imm(asm.R2, portRoCEv2, labelRedirect),
		asm.Ja.Label(labelPass),
	)
}

// redirectAndCount writes the metadata, cuts the frame to snapLen bytes
// and redirects it to the socket of the receive queue, falling back to
// XDP_PASS, then counts the verdict: the counter index is stored at R10-4
// and the verdict in R9 by every path into count.
//
// When bpf_xdp_adjust_meta fails (a driver without metadata support) the
// frame is redirected whole and without metadata, so that its length is
// still known. The cursor in R7 is not needed any more and holds the wire
// length.
func redirectAndCount(snapLen uint32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol(labelRedirect),
		asm.FnXdpGetBuffLen.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, -metaLen),
		asm.FnXdpAdjustMeta.Call(),
		asm.JNE.Imm(asm.R0, 0, labelSend),
		asm.FnKtimeGetNs.Call(),
		asm.LoadMem(asm.R2, asm.R6, xdpMDDataMeta, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, xdpMDData, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, metaLen),
		asm.JGT.Reg(asm.R4, asm.R3, labelSend),
		asm.StoreMem(asm.R2, metaTime, asm.R0, asm.DWord),
		asm.StoreMem(asm.R2, metaWireLen, asm.R7, asm.Word),
		asm.Mov.Imm32(asm.R3, metaMagicValue),
		asm.StoreMem(asm.R2, metaMagic, asm.R3, asm.Word),
		asm.JLE.Imm(asm.R7, int32(snapLen), labelSend),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, int32(snapLen)),
		asm.Sub.Reg(asm.R2, asm.R7), // negative: shrink by wire length - snapLen
		asm.FnXdpAdjustTail.Call(),  // on failure the frame goes whole

		asm.LoadMem(asm.R2, asm.R6, xdpMDRxQueueIndex, asm.Word).WithSymbol(labelSend),
		asm.LoadMapPtr(asm.R1, 0).WithReference(xsksMapName),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.StoreImm(asm.R10, -4, counterRedirected, asm.Word),
		asm.JEq.Imm(asm.R0, xdpRedirect, labelCount),
		asm.StoreImm(asm.R10, -4, counterNoSocket, asm.Word),

		asm.Mov.Reg(asm.R2, asm.R10).WithSymbol(labelCount),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, 0).WithReference(countersMapName),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, labelReturn),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),

		asm.Mov.Reg(asm.R0, asm.R9).WithSymbol(labelReturn),
		asm.Return(),
	}
}

// collectionSpec describes the program and its maps. The XSKMAP has one
// entry per queue index up to the highest queue captured.
func collectionSpec(r rule, xskEntries uint32) *ebpf.CollectionSpec {
	return &ebpf.CollectionSpec{
		Maps: map[string]*ebpf.MapSpec{
			xsksMapName: {
				Name:       xsksMapName,
				Type:       ebpf.XSKMap,
				KeySize:    4,
				ValueSize:  4,
				MaxEntries: xskEntries,
			},
			countersMapName: {
				Name:       countersMapName,
				Type:       ebpf.PerCPUArray,
				KeySize:    4,
				ValueSize:  8,
				MaxEntries: numCounters,
			},
		},
		Programs: map[string]*ebpf.ProgramSpec{
			programName: {
				Name:         programName,
				Type:         ebpf.XDP,
				Instructions: program(r),
				License:      license,
			},
		},
	}
}

// objects are the loaded program and maps.
type objects struct {
	Program  *ebpf.Program `ebpf:"rocescope_xdp"`
	XSKs     *ebpf.Map     `ebpf:"xsks_map"`
	Counters *ebpf.Map     `ebpf:"counters"`
}

// Close closes the program and the maps; fields may be nil.
func (o *objects) Close() error {
	return errors.Join(o.Program.Close(), o.XSKs.Close(), o.Counters.Close())
}
