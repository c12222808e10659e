package metrics

import (
	"bufio"
	"bytes"
	"context"
	"github.com/rocescope/rocescope/internal/tsharktest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
)

// corpusDir is the shared corpus of real captures: $ROCESCOPE_CAPTURES, or
// ../shared/captures beside the module root.
func corpusDir() string {
	if d := os.Getenv("ROCESCOPE_CAPTURES"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "shared", "captures")
}

// tsharkOpcodes counts the BTH opcodes tshark's infiniband dissector shows
// in path: the independent reference for the engine's opcode histogram.
func tsharkOpcodes(t *testing.T, path string) map[int]uint64 {
	t.Helper()
	out, err := tsharktest.Run(t, path, "-n", "--disable-protocol", "rpcordma", "--disable-protocol", "nvme-rdma",
		"--disable-protocol", "tftp", "-T", "fields", "-E", "occurrence=f", "-e", "infiniband.bth.opcode")
	if err != nil {
		t.Fatalf("tshark %s: %v", path, err)
	}
	counts := map[int]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			op, err := strconv.ParseInt(s, 0, 32)
			if err != nil {
				t.Fatalf("tshark %s: opcode %q: %v", path, s, err)
			}
			counts[int(op)]++
		}
	}
	return counts
}

// TestReplayCorpusOpcodesMatchTshark replays every capture of the shared
// corpus through the engine and compares the opcode histogram, summed over
// windows, with tshark's; it also checks that every frame is accounted for.
func TestReplayCorpusOpcodesMatchTshark(t *testing.T) {
	tsharktest.Require(t)
	paths, _ := filepath.Glob(filepath.Join(corpusDir(), "*", "*.pcap"))
	if len(paths) == 0 {
		t.Skipf("no captures under %s", corpusDir())
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := file.Open([]string{path}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			e, err := New(&Config{Workers: 2, Host: "corpus"})
			if err != nil {
				t.Fatal(err)
			}
			var total Counters
			if err := e.Run(context.Background(), []capture.Source{src}, func(w *Window) error {
				total.Add(&w.Counters)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if got := total[Packets]; got != src.Stats().Received || got == 0 {
				t.Errorf("packets %d, frames read %d", got, src.Stats().Received)
			}
			if sum := total[RoCEPackets] + total[OtherPackets] + total[MalformedPackets] + total[TruncatedPackets]; sum != total[Packets] {
				t.Errorf("roce+other+malformed+truncated = %d, packets = %d", sum, total[Packets])
			}
			got := map[int]uint64{}
			for op := range 256 {
				if n := total.Opcode(uint8(op)); n > 0 {
					got[op] = n
				}
			}
			want := tsharkOpcodes(t, path)
			if total[TruncatedPackets] == 0 {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("opcode histogram (-tshark +rocescope):\n%s", diff)
				}
				return
			}
			// A frame cut inside its transport headers has an opcode
			// tshark shows but the engine counts as truncated, not RoCE:
			// only those may be missing.
			var missing uint64
			for op, n := range want {
				if got[op] > n {
					t.Errorf("opcode %d: %d packets, tshark shows %d", op, got[op], n)
				}
				missing += n - min(n, got[op])
			}
			if missing > total[TruncatedPackets] {
				t.Errorf("%d opcodes tshark shows are missing, more than the %d truncated frames", missing, total[TruncatedPackets])
			}
		})
	}
}
