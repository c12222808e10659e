package afxdp_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/afxdp"
)

// Open captures RoCE from every queue of eth0; one goroutine reads each
// queue's source. Not run: it needs root and a real interface.
func ExampleOpen() {
	g, err := afxdp.Open("eth0", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	fmt.Println(g.Describe())
	for _, src := range g.Sources() {
		go func(src capture.Source) {
			b := capture.NewBatch(256)
			for {
				if err := src.Next(b); errors.Is(err, os.ErrClosed) {
					return
				} else if err != nil {
					log.Print(err)
					return
				}
				for _, f := range b.Frames {
					_ = f.Data // valid until the next Next
				}
			}
		}(src)
	}
}
