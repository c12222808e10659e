package synth_test

import (
	"errors"
	"fmt"
	"io"
	"log"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
)

// Example generates a small trace, counts its RDMA WRITE First packets as
// an analyzer would, and compares the count with the truth.
func Example() {
	src, err := synth.New(&synth.Config{Seed: 7, Packets: 10_000, Flows: 50})
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	b := capture.NewBatch(256)
	var p decode.Packet
	writeFirst := 0
	for {
		err := src.Next(b)
		for _, f := range b.Frames {
			if p.Decode(f.Data, f.Link) == nil && p.IsRoCE() && p.BTH.Opcode == 0x06 {
				writeFirst++
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	tr := src.Truth()
	fmt.Println("windows:", len(tr.Windows))
	fmt.Println("frames:", tr.Total.Packets)
	fmt.Println("WRITE First agrees:", uint64(writeFirst) == tr.Total.Opcodes[0x06])
	// Output:
	// windows: 3
	// frames: 10000
	// WRITE First agrees: true
}
