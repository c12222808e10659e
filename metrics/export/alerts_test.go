package export

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/metrics"
)

// TestAlertRules checks the example alert rules of docs/alerts.yml with
// promtool (syntax, and the unit tests of docs/alerts_test.yml: each
// alert fires on trouble and not on healthy traffic), and that every
// rocescope series they use is one the endpoint serves.
func TestAlertRules(t *testing.T) {
	rules := filepath.Join("..", "..", "docs", "alerts.yml")
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus): the example alert rules are not checked")
	}
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", filepath.Join("..", "..", "docs", "alerts_test.yml")}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	b, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ServePrometheus("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, r := range handReports(t, &metrics.Config{Workers: 1, Host: "h"}) {
		p.Update(r)
	}
	text := string(p.AppendText(nil))
	used := regexp.MustCompile(`rocescope_[a-z_]+`).FindAllString(string(b), -1)
	if len(used) < 3 {
		t.Fatalf("the rules use %d rocescope series", len(used))
	}
	for _, name := range used {
		if !strings.Contains(text, "\n# TYPE "+name+" ") {
			t.Errorf("the rules use %s, which the endpoint does not serve", name)
		}
	}
}
