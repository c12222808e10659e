package mapped

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// record is an element the size of a flow record.
type record struct {
	n uint64
	_ [344]byte
}

// TestWholeHugePages checks that an array of half a huge page or more
// lives in a mapping of whole huge pages on a huge page boundary, before
// and after it grows, so that every page of it can be a huge one; that
// growing keeps what was written; and that a smaller array is mapped at
// its own size.
func TestWholeHugePages(t *testing.T) {
	forceHuge(t, HugeOn)
	const rec = int(unsafe.Sizeof(record{}))
	aligned := func(what string, a []record, m *Memory, n int) {
		t.Helper()
		if len(a) != n || cap(a) != n || !Holds(m, a) {
			t.Fatalf("%s: array of %d/%d records, in its mapping %v; want %d, true", what, len(a), cap(a), Holds(m, a), n)
		}
		if p := uintptr(unsafe.Pointer(&m.b[0])); p%HugePage != 0 || len(m.b)%HugePage != 0 || len(m.b) < n*rec || len(m.b)-n*rec >= HugePage {
			t.Fatalf("%s: mapping of %d bytes at %#x for %d bytes of records; want whole huge pages on a boundary", what, len(m.b), p, n*rec)
		}
	}
	advised := Advised.Load()
	n := 3*HugePage/rec + 1 // a mapping of 4 MiB would fall short of a huge page
	a, m := Make[record](n)
	if m.b == nil {
		t.Skip("mmap refused: the array is on the Go heap")
	}
	defer m.Free()
	aligned("made", a, &m, n)
	if Advised.Load() != advised+1 {
		t.Errorf("Advised went from %d to %d making one mapping, want one more", advised, Advised.Load())
	}
	a[n-1].n = 7
	grown, ok := resize[record](&m, 5*n)
	if !ok {
		t.Fatal("mremap refused to grow the mapping")
	}
	aligned("grown", grown, &m, 5*n)
	if grown[n-1].n != 7 {
		t.Fatalf("growing lost a record's count: %d, want 7", grown[n-1].n)
	}

	small, sm := Make[record](10)
	defer sm.Free()
	if len(small) != 10 || len(sm.b) != 10*rec {
		t.Fatalf("a mapping of 10 records maps %d bytes, want %d", len(sm.b), 10*rec)
	}
	if Holds(&sm, a) || Holds(&sm, small[:0:0]) {
		t.Fatal("a mapping holds an array it does not, or an empty one")
	}
	var none Memory
	if _, ok := resize[record](&none, 4); ok {
		t.Fatal("resize of no mapping succeeded")
	}
	// An array not in the mapping moves into a new one, the old freed.
	grown[0].n = 3
	moved := Grow(&sm, grown[:2], 20)
	if len(moved) != 20 || !Holds(&sm, moved) || moved[0].n != 3 || Holds(&sm, small) {
		t.Fatal("Grow of an array another mapping holds did not move it into a new one")
	}
	sm.Free()
	if sm.b != nil {
		t.Fatal("Free left the mapping in place")
	}
	sm.Free() // twice: nothing to do

	// A mapping smaller than half a huge page grows past that into a
	// new mapping of a huge page on a huge page boundary, with what was
	// written; so is an array of that size made at once.
	half := hugeFrom/rec + 1
	below, bm := Make[record](half - 1)
	defer bm.Free()
	if len(bm.b) != len(below)*rec {
		t.Fatalf("an array of %d bytes, below half a huge page, maps %d bytes, want its own size", len(below)*rec, len(bm.b))
	}
	at, am := Make[record](half)
	defer am.Free()
	aligned("made of half a huge page", at, &am, half)
	few, fm := Make[record](100)
	few[99].n = 9
	if _, ok := resize[record](&fm, half); ok {
		t.Fatal("resize grew a mapping smaller than half a huge page past that, where it may start off a boundary")
	}
	past := Grow(&fm, few, half)
	defer fm.Free()
	aligned("grown past half a huge page", past, &fm, half)
	if past[99].n != 9 {
		t.Fatalf("growing past half a huge page lost a record's count: %d, want 9", past[99].n)
	}
	within := Grow(&fm, past, n)
	aligned("grown past a huge page", within, &fm, n)
	if within[99].n != 9 {
		t.Fatalf("growing past a huge page lost a record's count: %d, want 9", within[99].n)
	}
}

// forceHuge sets the huge-page policy p for the test, and HugeAuto again
// after it.
func forceHuge(t *testing.T, p HugePages) {
	SetHugePages(p)
	t.Cleanup(func() { SetHugePages(HugeAuto) })
}

// TestHugePagePolicy checks with the kernel's own account of the mapping
// (the VmFlags of /proc/self/smaps: hg for MADV_HUGEPAGE, nh for
// MADV_NOHUGEPAGE) that on asks for huge pages and off refuses them.
func TestHugePagePolicy(t *testing.T) {
	for _, tc := range []struct {
		policy  HugePages
		flag    string
		advised int64
	}{{HugeOn, "hg", 1}, {HugeOff, "nh", 0}} {
		forceHuge(t, tc.policy)
		before := Advised.Load()
		a, m := Make[record](2 * HugePage / int(unsafe.Sizeof(record{})))
		if m.b == nil {
			t.Skip("mmap refused: the array is on the Go heap")
		}
		flags := smaps(t, uintptr(unsafe.Pointer(&a[0])), "VmFlags:")
		m.Free()
		if !slices.Contains(flags, tc.flag) {
			t.Errorf("--huge-pages %v: the mapping's VmFlags are %q, want %s among them", tc.policy, flags, tc.flag)
		}
		if got := Advised.Load() - before; got != tc.advised {
			t.Errorf("--huge-pages %v: Advised grew by %d, want %d", tc.policy, got, tc.advised)
		}
	}
}

// smaps returns the fields of the line of /proc/self/smaps that begins
// with key (VmFlags:, Rss:) in the entry of the mapping at addr.
func smaps(t *testing.T, addr uintptr, key string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	start := fmt.Sprintf("%x-", addr)
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, start):
			in = true
		case in && strings.HasPrefix(line, key):
			return strings.Fields(strings.TrimPrefix(line, key))
		}
	}
	t.Fatalf("no %s of a mapping at %#x in /proc/self/smaps", key, addr)
	return nil
}

// TestPopulate checks with the kernel's account (Rss in /proc/self/smaps)
// that Populate commits every page of a mapping at once, and that a
// mapping not populated commits none until touched.
func TestPopulate(t *testing.T) {
	needPopulate(t)
	forceHuge(t, HugeOff)
	const n = 256 << 10 // 2 MiB of uint64, in 4 KiB pages
	for _, populate := range []bool{false, true} {
		a, m := Make[uint64](n)
		if m.b == nil {
			t.Skip("mmap refused: the array is on the Go heap")
		}
		if populate {
			m.Populate()
		}
		rss := smaps(t, uintptr(unsafe.Pointer(&a[0])), "Rss:")
		m.Free()
		want := "0"
		if populate {
			want = "2048"
		}
		if len(rss) != 2 || rss[0] != want || rss[1] != "kB" {
			t.Errorf("populate %v: Rss %q, want %s kB", populate, rss, want)
		}
	}
	var none Memory
	none.Populate() // no mapping: nothing to do
}

// needPopulate skips the test on a kernel without MADV_POPULATE_WRITE.
func needPopulate(t *testing.T) {
	t.Helper()
	if !Commits() {
		t.Skip("the kernel has no MADV_POPULATE_WRITE (Linux 5.14)")
	}
}

// TestCommit checks that Commit commits exactly the 4 KiB pages a range of
// an array spans, page by page as mincore sees them, and that the array
// stays zero.
func TestCommit(t *testing.T) {
	needPopulate(t)
	forceHuge(t, HugeOff)
	a, m := Make[uint64](256 << 10) // 2 MiB
	if m.b == nil {
		t.Skip("mmap refused: the array is on the Go heap")
	}
	defer m.Free()
	if in := Resident(a); len(in) != 512 || slices.Contains(in, true) {
		t.Fatalf("a new mapping: %d pages, resident %v; want 512, none", len(in), in)
	}
	Commit(a[1000:3000]) // bytes 8 000 to 24 000: pages 1 to 5
	Commit(a[:0])        // nothing
	in := Resident(a)
	for p, r := range in {
		if want := p >= 1 && p <= 5; r != want {
			t.Errorf("page %d resident %v, want %v", p, r, want)
		}
	}
	if a[1000] != 0 || a[2999] != 0 {
		t.Fatalf("committed elements %d, %d; want zero", a[1000], a[2999])
	}
}

// TestAutoHuge checks HugeAuto's rule on the figures it was made from:
// a bare machine always; the VM whose 4 KiB first touch cost 13-15 µs
// yes, the one where it cost 1.5-3 µs no.
func TestAutoHuge(t *testing.T) {
	for _, tc := range []struct {
		vm      bool
		perPage time.Duration
		want    bool
	}{
		{false, 300 * time.Nanosecond, true},
		{false, 20 * time.Microsecond, true},
		{true, 14 * time.Microsecond, true},
		{true, hugeWorthFrom, true},
		{true, hugeWorthFrom - 1, false},
		{true, 1700 * time.Nanosecond, false},
	} {
		asked := false
		perPage := func() time.Duration { asked = true; return tc.perPage }
		if got := autoHuge(tc.vm, perPage); got != tc.want || asked != tc.vm {
			t.Errorf("autoHuge(vm %v, %v a page) = %v, cost measured %v; want %v, measured only in a VM", tc.vm, tc.perPage, got, asked, tc.want)
		}
	}
	for _, p := range []HugePages{HugeOn, HugeOff} {
		if got := decideHuge(p); got != (p == HugeOn) {
			t.Errorf("decideHuge(%v) = %v", p, got)
		}
	}
}

// TestCPUInfo reads the model name and the flags line of /proc/cpuinfo
// texts of a VM, a bare x86 machine and an arm64 one (neither line).
func TestCPUInfo(t *testing.T) {
	for _, tc := range []struct {
		text  string
		model string
		vm    bool
	}{
		{"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu vme de pse rdrand hypervisor lahf_lm\nbugs\t\t: sysret_ss_attrs\n\nprocessor\t: 1\nmodel name\t: other\n", "AMD EPYC 9654 96-Core Processor", true},
		{"processor\t: 0\nflags\t\t: fpu vme hypervisor\n", "", true},
		{"processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6338\nflags\t\t: fpu vme de pse rdrand lahf_lm\nvmx flags\t: vnmi hypervisor_x\n", "Intel(R) Xeon(R) Gold 6338", false},
		{"processor\t: 0\nflags\t\t: fpu vme\n\nprocessor\t: 1\nflags\t\t: fpu vme hypervisor\n", "", false}, // the first flags line
		{"processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes\n", "", false},
		{"", "", false},
	} {
		if got := cpuInfo(strings.NewReader(tc.text)); got.Model != tc.model || got.VM != tc.vm || got.FirstTouch != 0 {
			t.Errorf("cpuInfo(%q) = %+v, want model %q, VM %v", tc.text, got, tc.model, tc.vm)
		}
	}
}

// TestTouchCost checks that the first-touch probe reads the thread's CPU
// clock around its touches: a cost above zero, and below the 1 ms a page
// no machine comes near.
func TestTouchCost(t *testing.T) {
	if c := touchCost(); c <= 0 || c >= time.Millisecond {
		t.Fatalf("touchCost() = %v a page, want a positive cost below 1ms", c)
	}
}

// TestProbe checks that Probe reads the machine as HugeAuto does (the
// hypervisor flag of /proc/cpuinfo, a measured first touch), with its
// model name, and that a Machine decides by autoHuge's rule.
func TestProbe(t *testing.T) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	want := cpuInfo(f)
	f.Close()
	m := Probe()
	if m.VM != want.VM || m.Model != want.Model || m.FirstTouch <= 0 || m.FirstTouch >= time.Millisecond {
		t.Errorf("Probe() = %+v; want VM %v, model %q and a first touch between 0 and 1ms", m, want.VM, want.Model)
	}
	for _, tc := range []struct {
		m    Machine
		want bool
	}{
		{Machine{VM: false, FirstTouch: time.Microsecond}, true},
		{Machine{VM: true, FirstTouch: 14 * time.Microsecond}, true},
		{Machine{VM: true, FirstTouch: 1700 * time.Nanosecond}, false},
	} {
		if got := tc.m.AutoHuge(); got != tc.want {
			t.Errorf("%+v.AutoHuge() = %v, want %v", tc.m, got, tc.want)
		}
	}
}
