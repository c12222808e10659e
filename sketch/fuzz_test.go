package sketch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// The fuzz targets decode arbitrary bytes with each sketch's UnmarshalBinary
// and check the decoding contract (checkDecode): no panic; an accepted input
// re-encodes to itself; a rejected one wraps ErrCorrupt and leaves a filled
// receiver unchanged. An accepted sketch must then answer queries and merge
// with a copy of itself. Their seeds are the sample encodings, committed in
// testdata/fuzz/<target>/ (TestFuzzCorpus keeps them current).

func FuzzLinearCounting(f *testing.F) { fuzzCodec(f, 0) }
func FuzzDistinct(f *testing.F)       { fuzzCodec(f, 1) }
func FuzzCountMin(f *testing.F)       { fuzzCodec(f, 2) }
func FuzzTopK(f *testing.F)           { fuzzCodec(f, 3) }
func FuzzQuantile(f *testing.F)       { fuzzCodec(f, 4) }

// fuzzTargets names the fuzz target of each codec, in the order of codecs.
var fuzzTargets = []string{"FuzzLinearCounting", "FuzzDistinct", "FuzzCountMin", "FuzzTopK", "FuzzQuantile"}

func fuzzCodec(f *testing.F, i int) {
	c := codecs[i]
	f.Fuzz(func(t *testing.T, data []byte) {
		if checkDecode(t, c, data) == nil {
			exercise(t, c.name, data)
		}
	})
}

// exercise decodes the valid encoding data of the named sketch and runs its
// queries and a merge with a copy of itself.
func exercise(t *testing.T, name string, data []byte) {
	var err error
	switch name {
	case "linear counting":
		var s LinearCounting
		_ = s.UnmarshalBinary(data)
		_ = s.Estimate()
		err = s.Merge(s.Clone())
	case "distinct":
		var s Distinct
		_ = s.UnmarshalBinary(data)
		_, _ = s.Estimate(), s.HyperLogLog()
		err = s.Merge(s.Clone())
	case "count-min":
		var s CountMin
		_ = s.UnmarshalBinary(data)
		_ = s.Estimate(12345)
		s.Add(1, 1)
		if err = s.Merge(s.Clone()); err == nil {
			checkBlocks(t, "decoded, added to and merged", &s)
			s.Reset()
			if slices.ContainsFunc(s.counters, func(v uint64) bool { return v != 0 }) {
				t.Fatal("count-min: counters left after Reset")
			}
		}
	case "top-k":
		var s TopK[uint32]
		_ = s.UnmarshalBinary(data, 4, readUint32)
		_ = s.Top(nil)
		s.Update(1, 1, 1)
		if err = s.Merge(s.Clone()); err == nil {
			err = s.MergeDisjoint(s.Clone())
		}
	case "quantile":
		var s Quantile
		_ = s.UnmarshalBinary(data)
		for _, p := range []float64{0, 0.5, 1} {
			_ = s.Quantile(p)
		}
		s.Add(1)
		err = s.Merge(s.Clone())
	}
	if err != nil {
		t.Fatalf("%s: merge with a copy: %v", name, err)
	}
}

// TestFuzzCorpus checks that testdata/fuzz holds the current sample
// encodings as seeds of each fuzz target. With ROCESCOPE_WRITE_FUZZ_CORPUS=1
// it writes them instead.
func TestFuzzCorpus(t *testing.T) {
	write := os.Getenv("ROCESCOPE_WRITE_FUZZ_CORPUS") == "1"
	for i, c := range codecs {
		dir := filepath.Join("testdata", "fuzz", fuzzTargets[i])
		if write {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for j, data := range c.samples() {
			path := filepath.Join(dir, "sample"+strconv.Itoa(j))
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if write {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("%s: missing or stale (err %v): run ROCESCOPE_WRITE_FUZZ_CORPUS=1 go test -run TestFuzzCorpus ./sketch", path, err)
			}
		}
	}
}
