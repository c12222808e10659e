package export

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// TestHostNamesEscaped: host names that reach a sink unchecked (merge
// refuses them, but a library caller may not) cannot become a spreadsheet
// formula in CSV nor terminal control sequences in the table; the hosts a
// merge lacked are listed in JSON and CSV (missing_hosts) and in the table.
func TestHostNamesEscaped(t *testing.T) {
	hosts := []string{`=HYPERLINK("http://example.com/")`, "\x1b[2Jx"}
	r := &report.Report{Window: &metrics.Window{Start: 1_700_000_000e9, Length: 1e9, Hosts: hosts}, MissingHosts: []string{"c", "d"}}

	var out bytes.Buffer
	if err := NewCSV(&out).Write(r); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(rows[0], "host")
	if got, want := rows[1][col], "'"+strings.Join(hosts, " "); col < 0 || got != want {
		t.Errorf("CSV host cell %q, want %q", got, want)
	}
	if col := slices.Index(rows[0], "missing_hosts"); col != len(rows[0])-1 || rows[1][col] != "c d" {
		t.Errorf("CSV missing_hosts: column %d of %d, window row %q; want the last, \"c d\"", col, len(rows[0]), rows[1])
	}

	out.Reset()
	if err := NewTable(&out, &TableOptions{Width: 200}).Write(r); err != nil {
		t.Fatal(err)
	}
	head := strings.SplitN(out.String(), "\n", 2)[0]
	if strings.ContainsRune(out.String(), '\x1b') || !strings.Contains(head, `"\x1b[2Jx"`) || !strings.HasSuffix(head, "missing c,d") {
		t.Errorf("table header %q: want the escape sequence quoted, and the missing hosts", head)
	}

	if got := string(AppendJSON(nil, r)); !strings.Contains(got, `"hosts":["=HYPERLINK(\"http://example.com/\")","\u001b[2Jx"],"missing_hosts":["c","d"],`) {
		t.Errorf("JSON %.300s: want the hosts escaped and missing_hosts", got)
	}
}
