package decode_test

import (
	"encoding/hex"
	"fmt"

	"github.com/rocescope/rocescope/decode"
)

// A RoCEv2 NAK: the responder saw a PSN gap on QP 0x41.
func Example() {
	frame, _ := hex.DecodeString("02000000000b02000000000a0800" + // Ethernet
		"450200301234400040110000" + "0a0000010a000002" + // IPv4 10.0.0.1 → 10.0.0.2, ECT(0)
		"c00012b7001c0000" + // UDP to 4791
		"1140ffff00000041000003e8" + // BTH: RC Acknowledge, QP 0x41, PSN 1000
		"6000004d" + "a1b2c3d4") // AETH: NAK, PSN sequence error, MSN 77; ICRC
	var p decode.Packet
	if err := p.Decode(frame, decode.LinkEthernet); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Kind, p.Src, "→", p.Dst, p.BTH.Opcode, "QP", p.BTH.DestQP, "PSN", p.BTH.PSN)
	fmt.Println(p.AETH.Kind(), p.AETH.NAKCode())
	fmt.Printf("{%s}\n", p.AppendJSON(nil))
	// Output:
	// rocev2 10.0.0.1 → 10.0.0.2 RC Acknowledge QP 65 PSN 1000
	// NAK PSN sequence error
	// {"kind":"rocev2","src":"10.0.0.1","dst":"10.0.0.2","sport":49152,"dport":4791,"ecn":2,"dscp":0,"bth":{"opcode":17,"se":false,"m":true,"pad":0,"tver":0,"pkey":65535,"fecn":false,"becn":false,"dqp":65,"a":false,"psn":1000},"aeth":{"syndrome":96,"msn":77},"payload_len":0,"icrc":2712847316,"opcode_name":"RC Acknowledge"}
}
