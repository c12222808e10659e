// Package layering holds the test that enforces the layering of
// docs/DESIGN.md on the imports of every package of the module.
package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/rocescope/rocescope/"

// pkg is what go list tells of a package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// testKits are the internal packages only tests may import.
var testKits = []string{"internal/testframes", "internal/netnstest", "internal/tsharktest", "internal/enginetest",
	"internal/clickhousetest", "internal/freeport", "internal/testfifo", "internal/mappedtest"}

// under reports whether the package path p (module-relative) is dir or
// below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// violation returns why package from may not import imp (both module-
// relative, or imp a full path outside the module), or "".
func violation(from, imp string, inTest bool) string {
	own, ok := strings.CutPrefix(imp, module)
	switch {
	case ok && under(own, "cmd"):
		return "nothing imports the command line"
	case ok && under(from, "capture") && under(own, "metrics"):
		return "capture imports no metrics package"
	case ok && !inTest && !under(from, "internal") && isTestKit(own):
		return "only tests import the internal test kits"
	case inTest:
		return ""
	case ok && under(from, "decode") && !under(own, "decode"):
		return "decode imports no other rocescope package"
	case ok && under(from, "sketch") && !under(own, "sketch"):
		return "sketch imports no other rocescope package"
	case under(from, "internal/frame") && (ok || !standard(imp)):
		return "the frame builder uses the standard library only"
	case ok:
		return ""
	case imp == "golang.org/x/sys/unix" && !under(from, "capture") && !under(from, "cmd") && !under(from, "internal"):
		return "only capture, the engine's mapped memory (internal/mapped) and the command line touch golang.org/x/sys/unix"
	case (under(from, "decode") || under(from, "sketch")) && !standard(imp) &&
		!(under(from, "decode/iblayers") && strings.HasPrefix(imp, "github.com/google/gopacket")) &&
		!(under(from, "sketch") && imp == "github.com/axiomhq/hyperloglog"):
		return "decode and sketch use the standard library only (but for gopacket in decode/iblayers, axiomhq/hyperloglog in sketch)"
	}
	return ""
}

func isTestKit(p string) bool {
	for _, k := range testKits {
		if under(p, k) {
			return true
		}
	}
	return false
}

// standard reports whether an import path is of the standard library: its
// first element has no dot.
func standard(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// TestLayering lists every package of the module with go list and checks
// each import, of the package and of its tests, against docs/DESIGN.md.
func TestLayering(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool: %v", err)
	}
	out, err := exec.Command(gotool, "list", "-json=ImportPath,Imports,TestImports,XTestImports", module+"...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	n := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		from := strings.TrimPrefix(p.ImportPath, module)
		check := func(imps []string, inTest bool) {
			for _, imp := range imps {
				if why := violation(from, imp, inTest); why != "" {
					t.Errorf("%s imports %s: %s", from, imp, why)
				}
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
	}
	if n < 20 {
		t.Errorf("go list found %d packages, want the whole module", n)
	}
}

// TestViolations checks that the rules catch what they must.
func TestViolations(t *testing.T) {
	for _, c := range []struct {
		from, imp string
		test      bool
	}{
		{"capture/file", module + "metrics", false},
		{"capture/file", module + "metrics/state", true},
		{"metrics", module + "cmd/rocescope", false},
		{"decode", module + "capture", false},
		{"sketch", module + "decode", false},
		{"decode", "github.com/google/gopacket", false},
		{"metrics", module + "internal/testframes", false},
		{"metrics/report", "golang.org/x/sys/unix", false},
		{"metrics", "golang.org/x/sys/unix", false},
		{"internal/frame", module + "decode", false},
		{"internal/frame", "github.com/google/gopacket", false},
	} {
		if violation(c.from, c.imp, c.test) == "" {
			t.Errorf("%s importing %s (test %v) passes", c.from, c.imp, c.test)
		}
	}
	for _, c := range []struct{ from, imp string }{
		{"decode/iblayers", "github.com/google/gopacket/layers"},
		{"metrics", module + "capture"},
		{"internal/mapped", "golang.org/x/sys/unix"},
		{"capture/filter", module + "decode"},
		{"decode", "encoding/binary"},
		{"capture/synth", module + "internal/frame"},
		{"internal/frame", "hash/crc32"},
	} {
		if why := violation(c.from, c.imp, false); why != "" {
			t.Errorf("%s importing %s: %s", c.from, c.imp, why)
		}
	}
}
