package file_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
)

// Example writes a small pcap file and replays it.
func Example() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "two.pcap")

	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	w, err := file.NewWriter(f, &file.WriterOptions{SnapLen: 4})
	if err != nil {
		log.Fatal(err)
	}
	const t0 = 1_700_000_000_000_000_000 // ns since the epoch
	w.WriteFrame(t0, []byte{1, 2, 3, 4, 5, 6}, 6)
	w.WriteFrame(t0+1500, []byte{7, 8}, 64)
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	f.Close()

	src, err := file.Open([]string{path}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	b := capture.NewBatch(64)
	for {
		err := src.Next(b)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		for _, fr := range b.Frames {
			fmt.Printf("t=%d len=%d data=%v link=%d\n", fr.Time-t0, fr.OrigLen, fr.Data, fr.Link)
		}
	}
	p := src.Progress()
	fmt.Printf("file %d/%d: %d of %d bytes, %d frames\n", p.File, p.Files, p.Done, p.Total, src.Stats().Received)
	// Output:
	// t=0 len=6 data=[1 2 3 4] link=1
	// t=1500 len=64 data=[7 8] link=1
	// file 1/1: 62 of 62 bytes, 2 frames
}

// ExampleOpen_merge writes the captures of two mirrors of the same link
// and replays them merged by time, then one after another (Concat).
func ExampleOpen_merge() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	const t0 = 1_700_000_000_000_000_000 // ns since the epoch
	var paths []string
	for i, times := range [][]int64{{0, 20, 40}, {10, 20, 30}} {
		path := filepath.Join(dir, fmt.Sprintf("mirror%d.pcap", i))
		f, err := os.Create(path)
		if err != nil {
			log.Fatal(err)
		}
		w, err := file.NewWriter(f, nil)
		if err != nil {
			log.Fatal(err)
		}
		for _, t := range times {
			w.WriteFrame(t0+t, []byte{byte(i)}, 60)
		}
		if err := w.Flush(); err != nil {
			log.Fatal(err)
		}
		f.Close()
		paths = append(paths, path)
	}

	for _, opts := range []*file.Options{nil, {Concat: true}} {
		src, err := file.Open(paths, opts)
		if err != nil {
			log.Fatal(err)
		}
		b := capture.NewBatch(64)
		for {
			err := src.Next(b)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				log.Fatal(err)
			}
			for _, fr := range b.Frames {
				fmt.Printf(" %d@%d", fr.Data[0], fr.Time-t0)
			}
		}
		fmt.Println()
		src.Close()
	}
	// Output:
	//  0@0 1@10 0@20 1@20 1@30 0@40
	//  0@0 0@20 0@40 1@10 1@20 1@30
}
