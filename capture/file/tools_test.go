package file

import (
	"encoding/binary"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/decode"
)

// sharedCaptures holds real captures made by other people (see its README).
const sharedCaptures = "../../../shared/captures"

// Shared captures used by the conversion tests.
const (
	sharedEthernet = "magnate3_linux-riscv-dev/soft-roce__mellanox__doc__rocev1.pcap"
	sharedERF      = "magnate3_linux-riscv-dev/soft-roce__ib_rdma_ping__ib2.pcap"
)

// needTool skips the test when a Wireshark tool is not installed.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
}

// sharedFiles returns the capture files under sharedCaptures, or skips.
func sharedFiles(t *testing.T) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(sharedCaptures, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".pcap") || strings.HasSuffix(p, ".pcapng")) {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil || len(paths) == 0 {
		t.Skipf("no shared captures in %s: %v", sharedCaptures, err)
	}
	return paths
}

// run runs a command and returns its standard output.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %q: %v\n%s", name, args, err, stderr)
	}
	return string(out)
}

// epochNs parses capinfos's "seconds.fraction" into ns.
func epochNs(t *testing.T, s string) int64 {
	t.Helper()
	sec, frac, _ := strings.Cut(s, ".")
	frac = (frac + "000000000")[:9]
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("capinfos time %q: %v %v", s, err1, err2)
	}
	return a*1e9 + b
}

// readPath reads every frame of the file at path.
func readPath(t *testing.T, path string) []frame {
	t.Helper()
	src, err := Open([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := readAll(t, src, 64)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCapinfos reads every shared capture and compares the packet count and
// the earliest and latest timestamps with what capinfos reports. Times are
// compared to the microsecond for microsecond files: for ERF records in
// pcap, Wireshark takes the time from the ERF header (ns), the reader from
// the pcap record header (µs).
func TestCapinfos(t *testing.T) {
	needTool(t, "capinfos")
	for _, path := range sharedFiles(t) {
		t.Run(strings.TrimPrefix(path, sharedCaptures+"/"), func(t *testing.T) {
			fields := strings.Split(strings.TrimSpace(run(t, "capinfos", "-T", "-r", "-M", "-c", "-a", "-e", "-S", path)), "\t")
			if len(fields) != 4 {
				t.Fatalf("capinfos output %q", fields)
			}
			count, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatal(err)
			}
			first, last := epochNs(t, fields[2]), epochNs(t, fields[3])
			got := readPath(t, path)
			if len(got) != count {
				t.Errorf("%d frames, capinfos counts %d", len(got), count)
			}
			if len(got) == 0 {
				return
			}
			lo, hi := got[0].Time, got[0].Time
			for _, f := range got {
				lo, hi = min(lo, f.Time), max(hi, f.Time)
			}
			unit := int64(1)
			if head, err := os.ReadFile(path); err == nil && len(head) >= 4 && binary.LittleEndian.Uint32(head) == 0xa1b2c3d4 {
				unit = 1000
			}
			if lo/unit != first/unit || hi/unit != last/unit {
				t.Errorf("times %d..%d, capinfos %d..%d (compared in units of %d ns)", lo, hi, first, last, unit)
			}
		})
	}
}

// withoutTime returns the frames with their times cut to units of unit ns.
func cutTime(frames []frame, unit int64) []frame {
	out := slices.Clone(frames)
	for i := range out {
		out[i].Time -= out[i].Time % unit
	}
	return out
}

// TestEditcap converts shared captures with editcap to pcapng and to
// nanosecond pcap and checks that the reader returns the same frames for
// all three.
func TestEditcap(t *testing.T) {
	needTool(t, "editcap")
	for _, c := range []struct {
		name string
		unit int64 // Wireshark rewrites ERF times from the ERF header (ns)
	}{
		{sharedEthernet, 1},
		{sharedERF, 1000},
	} {
		path := filepath.Join(sharedCaptures, c.name)
		if _, err := os.Stat(path); err != nil {
			t.Skipf("shared capture missing: %v", err)
		}
		want := readPath(t, path)
		if len(want) == 0 {
			t.Fatalf("%s: no frames", path)
		}
		for _, format := range []string{"pcapng", "nsecpcap"} {
			t.Run(filepath.Base(c.name)+"/"+format, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "out")
				run(t, "editcap", "-F", format, path, out)
				got := readPath(t, out)
				if diff := diffFrames(cutTime(want, c.unit), cutTime(got, c.unit)); diff != "" {
					t.Errorf("frames (-original +%s):\n%s", format, diff)
				}
			})
		}
	}
}

// TestMergecap merges an Ethernet and an ERF capture into one pcapng file
// with two interfaces of different link types, and checks that every frame
// comes back with the link type and port of its interface.
func TestMergecap(t *testing.T) {
	needTool(t, "mergecap")
	eth, erf := filepath.Join(sharedCaptures, sharedEthernet), filepath.Join(sharedCaptures, sharedERF)
	for _, p := range []string{eth, erf} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("shared capture missing: %v", err)
		}
	}
	out := filepath.Join(t.TempDir(), "merged.pcapng")
	run(t, "mergecap", "-F", "pcapng", "-w", out, eth, erf)
	var want []frame
	for port, p := range []string{eth, erf} {
		for _, f := range readPath(t, p) {
			f.Port = uint16(port)
			want = append(want, f)
		}
	}
	got := readPath(t, out)
	for i, f := range got {
		if link := []decode.LinkType{decode.LinkEthernet, decode.LinkERF}[min(f.Port, 1)]; f.Link != link {
			t.Fatalf("frame %d: port %d link %d, want %d", i+1, f.Port, f.Link, link)
		}
		if i > 0 && f.Time < got[i-1].Time {
			t.Errorf("frame %d: time %d before the previous %d, mergecap merges in time order", i+1, f.Time, got[i-1].Time)
		}
	}
	order := func(a, b frame) int {
		if c := int(a.Port) - int(b.Port); c != 0 {
			return c
		}
		if c := int64(a.Time/1000) - int64(b.Time/1000); c != 0 {
			return int(max(-1, min(1, c)))
		}
		return slices.Compare(a.Data, b.Data)
	}
	want, got = cutTime(want, 1000), cutTime(got, 1000)
	slices.SortStableFunc(want, order)
	slices.SortStableFunc(got, order)
	if diff := diffFrames(want, got); diff != "" {
		t.Errorf("frames (-inputs +merged):\n%s", diff)
	}
}

// TestWriterCapinfos checks a file made by the writer with capinfos.
func TestWriterCapinfos(t *testing.T) {
	needTool(t, "capinfos")
	path := filepath.Join(t.TempDir(), "w.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range []int64{ns0 + 123456789, ns0 + 5, ns0 + 999999999} {
		if err := w.WriteFrame(ts, seq(byte(i), 40), 60); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(run(t, "capinfos", "-T", "-r", "-M", "-t", "-E", "-c", "-a", "-e", "-S", path))
	want := path + "\tnsecpcap\tether\t3\t1700000000.000000005\t1700000000.999999999"
	if got != want {
		t.Errorf("capinfos:\n%q\nwant\n%q", got, want)
	}
}
