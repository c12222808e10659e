// Package filter selects the frames rocescope analyzes, the way tcpdump
// and tshark users select them: a capture filter expression in tcpdump's
// syntax ([Expr]), compiled to classic BPF, and a RoCE filter ([RoCE]) on
// what BPF cannot see, the decoded InfiniBand transport headers: QP,
// opcode class, addresses also of RoCEv1, ERSPAN-carried and InfiniBand
// frames. A [Set] holds both; the engine counts the frames a set removes
// as filtered.
//
// # Expressions
//
// [Compile] reads the pcap-filter(7) subset below, pure Go, with libpcap's
// meaning of each part; a program built with the "pcap" build tag compiles
// with libpcap itself (pcap_compile) instead, so that every expression
// tcpdump takes works there (for SLL2 frames, which gopacket cannot name
// to libpcap, the subset's program is used). The subset:
//
//	host ADDR          IPv4 (IP, ARP, RARP) or IPv6 address, source or destination
//	net ADDR/LEN       an IPv4 or IPv6 network
//	port N             TCP, UDP or SCTP port, over IPv4 (first fragments) or IPv6
//	portrange N-M      ports N to M
//	ether host MAC     Ethernet address (also ether src, ether dst)
//	ether proto N      EtherType (a number, or ip, ip6, arp, rarp)
//	proto N            IP protocol or IPv6 next header (also ip proto, ip6 proto)
//	ip, ip6, arp, rarp, tcp, udp, sctp, icmp, icmp6
//	vlan [ID]          an 802.1Q or 802.1ad tag (with ID: that VLAN); as in
//	                   libpcap, the parts after it look behind the tag
//
// host, net, port and portrange take src or dst before them (both when
// neither is given) and a protocol before that: "udp dst port 4791", "ip6
// src net fd00::/8". Parts combine with and (&&), or (||) and not (!), and
// parentheses; and and or have the same precedence and group from the
// left, as in libpcap ("a or b and c" is "(a or b) and c"). A value alone
// takes the qualifiers of the part before it ("port 4791 or 4792"). Host
// names, "gateway", byte offsets ("udp[8] = 0x64"), "less" and "greater"
// are not in the subset: Compile says so, and a pcap build takes them.
//
// An expression applies to Ethernet frames, Linux cooked captures (SLL,
// SLL2) and raw IPv4/IPv6; a frame of another link type (ERF, raw
// InfiniBand) never matches it.
//
// # The RoCE filter
//
// [RoCE] keeps RoCE frames (with a BTH) whose addresses, QPs and opcode
// class match; every other frame does not match. Each field is a list, any
// of whose values matches; the fields must all match. [ParseQPs],
// [ParseOps] and [ParsePrefixes] read the forms an operator types.
//
// # Concurrency
//
// An Expr, a RoCE and a Set are not changed after they are made: Match may
// be called from many goroutines at once.
package filter
