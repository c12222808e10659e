package file

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
)

// synthFrames returns the frames of a synthetic RoCE trace.
func synthFrames(t testing.TB, cfg synth.Config) []frame {
	t.Helper()
	src, err := synth.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := capture.NewBatch(256)
	var out []frame
	for {
		err := src.Next(b)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = copyFrames(out, b)
	}
}

// pcapBytes returns frames as a nanosecond pcap file made by the writer.
func pcapBytes(t testing.TB, frames []frame) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := w.WriteFrame(f.Time, f.Data, int(f.OrigLen)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readOpts reads every frame of the files at paths with batches of n.
func readOpts(t testing.TB, paths []string, opts *Options, n int) []frame {
	t.Helper()
	src, err := Open(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := readAll(t, src, n)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// diffTimeLenData compares frames by time, lengths and bytes only, as a
// merged file from mergecap has its own link types and interfaces.
func diffTimeLenData(want, got []frame) string {
	strip := func(fs []frame) []frame {
		out := make([]frame, len(fs))
		for i, f := range fs {
			out[i] = frame{Data: f.Data, Time: f.Time, OrigLen: f.OrigLen}
		}
		return out
	}
	return diffFrames(strip(want), strip(got))
}

// TestMergeMergecap merges overlapping captures (two synthetic traces of
// the same seconds, and one capture twice, as two mirrors of one link
// give) and compares the frames, one by one, with those of the file that
// mergecap writes from the same inputs. The inputs are read mapped and as
// gzip (through the read buffers, with full frames so that the buffers
// refill while frames are read ahead), with several batch sizes.
func TestMergeMergecap(t *testing.T) {
	needTool(t, "mergecap")
	start := int64(1_700_000_000_000_000_000)
	a := synthFrames(t, synth.Config{Seed: 1, Packets: 12000, Start: start, Duration: 2 * time.Second})
	b := synthFrames(t, synth.Config{Seed: 2, Packets: 9000, Start: start + 5e8, Duration: 2 * time.Second})
	c := synthFrames(t, synth.Config{Seed: 3, Packets: 3000, Start: start, Duration: 3 * time.Second, SnapLen: 128})
	for _, tc := range []struct {
		name  string
		files [][]frame
	}{
		{"two traces", [][]frame{a, b}},
		{"one trace twice", [][]frame{a, a}},
		{"three traces", [][]frame{c, b, a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var plain, zipped []string
			for i, fs := range tc.files {
				data := pcapBytes(t, fs)
				p := filepath.Join(dir, fmt.Sprintf("in%d.pcap", i))
				z := p + ".gz"
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(z, gz(t, data), 0o644); err != nil {
					t.Fatal(err)
				}
				plain, zipped = append(plain, p), append(zipped, z)
			}
			out := filepath.Join(dir, "merged.pcap")
			run(t, "mergecap", append([]string{"-F", "nsecpcap", "-w", out}, plain...)...)
			want := readPath(t, out)
			total := 0
			for _, fs := range tc.files {
				total += len(fs)
			}
			if len(want) != total {
				t.Fatalf("mergecap wrote %d frames, want %d", len(want), total)
			}
			for _, in := range []struct {
				name  string
				paths []string
			}{{"mapped", plain}, {"gzip", zipped}} {
				for _, n := range []int{1, 7, 256, 4096} {
					t.Run(fmt.Sprintf("%s/batch=%d", in.name, n), func(t *testing.T) {
						got := readOpts(t, in.paths, nil, n)
						if diff := diffTimeLenData(want, got); diff != "" {
							t.Errorf("frames (-mergecap +merged):\n%s", diff)
						}
					})
				}
			}
		})
	}
}

// TestMergeRotated splits one trace into files that follow each other in
// time, as a rotated capture does (the last frame of one file and the
// first of the next at the same time, once), and checks that merging them
// gives exactly the frames of reading them one after another, which are
// those of the trace.
func TestMergeRotated(t *testing.T) {
	all := synthFrames(t, synth.Config{Seed: 7, Packets: 30000, SnapLen: 128})
	cuts := []int{0, 9000, 9001, 21000, len(all)}
	all[9001].Time = all[9000].Time // a tie across the cut
	var files [][]byte
	for i := 1; i < len(cuts); i++ {
		data := pcapBytes(t, all[cuts[i-1]:cuts[i]])
		if i%2 == 0 {
			data = gz(t, data)
		}
		files = append(files, data)
	}
	paths := writeTemp(t, files...)
	concat := readOpts(t, paths, &Options{Concat: true}, 64)
	if diff := diffFrames(all, concat); diff != "" {
		t.Fatalf("one after another (-trace +read):\n%s", diff)
	}
	for _, n := range []int{1, 64, 1000} {
		got := readOpts(t, paths, nil, n)
		if diff := diffFrames(concat, got); diff != "" {
			t.Errorf("batch %d: frames (-concatenated +merged):\n%s", n, diff)
		}
	}
}

// TestMergeProgress checks Progress over merged files: every file is
// opened at the first Next, and Done grows to the total of their sizes.
func TestMergeProgress(t *testing.T) {
	a := pcapBytes(t, synthFrames(t, synth.Config{Seed: 1, Packets: 2000, SnapLen: 128}))
	b := pcapBytes(t, synthFrames(t, synth.Config{Seed: 2, Packets: 3000, SnapLen: 128}))
	z := gz(t, b)
	size := int64(len(a) + len(z))
	src, err := Open(writeTemp(t, a, z), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if p := src.Progress(); p != (Progress{Files: 2, Total: size}) {
		t.Errorf("Progress() before Next = %+v, want %+v", p, Progress{Files: 2, Total: size})
	}
	bt := capture.NewBatch(100)
	if err := src.Next(bt); err != nil {
		t.Fatal(err)
	}
	if p := src.Progress(); p.File != 2 || p.Total != size || p.Done <= 0 || p.Done >= size {
		t.Errorf("Progress() after a batch = %+v, want 2 files open and 0 < Done < %d", p, size)
	}
	if _, err := readAll(t, src, 100); err != nil {
		t.Fatal(err)
	}
	if p := src.Progress(); p != (Progress{File: 2, Files: 2, Done: size, Total: size}) {
		t.Errorf("Progress() at the end = %+v, want Done = Total = %d", p, size)
	}
}

// TestMergeDamage checks that frames of a damaged file before the damage
// are merged with the others and the error follows them, and that with
// KeepGoing the damaged record is counted and the merge goes on.
func TestMergeDamage(t *testing.T) {
	pc, pcWant := basePcap(65535) // three records, at 0, 1 and 2 s
	late := pcapBytes(t, []frame{{Data: seq(9, 20), Time: pcWant[0].Time + 5e8, OrigLen: 20}, {Data: seq(8, 20), Time: pcWant[2].Time + 5e8, OrigLen: 20}})
	cut := pc[:len(pc)-1] // the third record is cut short
	paths := writeTemp(t, cut, late)
	src, err := Open(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := readAll(t, src, 16)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(paths[0])) {
		t.Errorf("error %v, want one naming %s", err, paths[0])
	}
	// The frames up to the damage in time order; the later frame of the
	// other file waits for the damaged file, which has no next frame.
	lateWant := readPath(t, paths[1])
	want := []frame{pcWant[0], lateWant[0], pcWant[1]}
	if diff := diffTimeLenData(want, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}

	got, src2, err := readFiles(t, &Options{KeepGoing: true}, cut, late)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, lateWant[1])
	if diff := diffTimeLenData(want, got); diff != "" {
		t.Errorf("KeepGoing: frames (-want +got):\n%s", diff)
	}
	if s := src2.Stats(); s.Errors != 1 || s.Received != uint64(len(want)) {
		t.Errorf("KeepGoing: Stats() = %+v, want %d received and 1 error", s, len(want))
	}
}

// TestMergeReadAhead merges gzip files, as a rotated capture's, and checks
// that after the first Next each file not yet reached holds at most
// mergeMinFill bytes read ahead (plus a record), not the 1 MiB chunks read
// from a single gzip file: all of them are read from the start.
func TestMergeReadAhead(t *testing.T) {
	all := synthFrames(t, synth.Config{Seed: 5, Packets: 40000, SnapLen: 128})
	var files [][]byte
	const n = 8
	for i := range n {
		files = append(files, gz(t, pcapBytes(t, all[i*len(all)/n:(i+1)*len(all)/n])))
	}
	src, err := Open(writeTemp(t, files...), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Next(capture.NewBatch(64)); err != nil {
		t.Fatal(err)
	}
	if len(src.ins) != n {
		t.Fatalf("%d files open, want %d", len(src.ins), n)
	}
	for i, in := range src.ins[1:] {
		if k := len(in.win.data); k > mergeMinFill+pcapRecordHeaderLen+128 {
			t.Errorf("file %d: %d bytes buffered, want at most %d", i+2, k, mergeMinFill+pcapRecordHeaderLen+128)
		}
	}
}
