package afpacket_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/afpacket"
	"github.com/rocescope/rocescope/decode"
)

// Open two sockets on a mirror port and count RoCE frames on the first.
// (Not run: it needs root and an interface.)
func Example() {
	g, err := afpacket.Open("eth1", &afpacket.Config{Sockets: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	fmt.Println(g.Describe())

	src := g.Sources()[0] // each source belongs to one goroutine
	b := capture.NewBatch(256)
	var p decode.Packet
	roce := 0
	for range 100 {
		if err := src.Next(b); errors.Is(err, os.ErrClosed) {
			break
		} else if err != nil {
			fmt.Println(err)
			return
		}
		// An empty batch means nothing came for a while: look at the clock.
		for _, f := range b.Frames {
			if p.Decode(f.Data, f.Link) == nil && p.IsRoCE() {
				roce++
			}
		}
	}
	fmt.Println(roce, "RoCE frames;", src.Stats().Dropped, "dropped by the kernel")
}
