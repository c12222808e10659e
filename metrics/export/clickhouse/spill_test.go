package clickhouse

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzLoadSpill loads spill files of any content after the header: every
// line that names a table must be loaded as a row of it, in order, and
// grouped by window; every other line (but comments), and a torn last
// line, must go to the dead-letter file; the file must be cut to its
// last whole line; nothing may panic.
func FuzzLoadSpill(f *testing.F) {
	var b batch
	var rw rowWriter
	for i := range 2 {
		rw.add(&b, testReport(i), 1)
	}
	good := appendSpillLines(nil, &b)
	for _, seed := range [][]byte{
		good,
		good[:len(good)-7],
		append([]byte("flows\t{}\n#comment\nnot a row\n\nwindows\t{}\n"), good...),
		[]byte("windows\t{\"window_start_ns\":-5,\"x\":1}\nwindows"),
		nil,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		d, err := openSpillDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "x.spill")
		if err := os.WriteFile(path, append([]byte(spillHeader), body...), 0o600); err != nil {
			t.Fatal(err)
		}
		warns := 0
		b, err := d.loadFile(path, func(string, ...any) { warns++ })
		if err != nil {
			t.Fatal(err)
		}
		defer b.file.f.Close()
		cut := bytes.LastIndexByte(body, '\n') + 1
		var rows [numTables][]byte
		var bad []byte
		groups := 0
		for line := range bytes.Lines(body[:cut]) {
			if line[0] == '#' {
				continue
			}
			t := -1
			if name, row, ok := bytes.Cut(line, []byte{'\t'}); ok {
				t = slices.IndexFunc(tables, func(t table) bool { return t.name == string(name) })
				if t >= 0 {
					if t == tWindows || groups == 0 {
						groups++
					}
					rows[t] = append(rows[t], row...)
				}
			}
			if t < 0 {
				bad = append(bad, line...)
			}
		}
		for i := range rows {
			if !bytes.Equal(rows[i], b.rows[i]) {
				t.Errorf("rows of %s: %q, want %q", tables[i].name, b.rows[i], rows[i])
			}
		}
		if len(b.wins) != groups {
			t.Errorf("%d windows, want %d", len(b.wins), groups)
		}
		for i, w := range b.wins {
			for tb := range w.end {
				if i > 0 && w.end[tb] < b.wins[i-1].end[tb] || i == len(b.wins)-1 && w.end[tb] != len(b.rows[tb]) {
					t.Errorf("window %d ends at %v of %d rows", i, w.end, len(b.rows[tb]))
				}
			}
		}
		if data, err := os.ReadFile(path); err != nil || !bytes.Equal(data, append([]byte(spillHeader), body[:cut]...)) {
			t.Errorf("the spill file holds %q (%v), want it cut to its last whole line", data, err)
		}
		// The dead-letter file: a comment and the torn line, a comment
		// and the lines that are not rows.
		var want [][]byte
		if cut < len(body) {
			want = append(want, append(slices.Clone(body[cut:]), '\n'))
		}
		if bad != nil {
			want = append(want, bad)
		}
		if want == nil {
			if files := spillFiles(t, dir, refusedSuffix); len(files) > 0 || warns > 0 {
				t.Errorf("dead-letter files %q and %d warnings for a file without a bad line", files, warns)
			}
			return
		}
		files := spillFiles(t, dir, refusedSuffix)
		if len(files) != 1 || warns != len(want) {
			t.Fatalf("dead-letter files %q, %d warnings; want 1 and %d", files, warns, len(want))
		}
		data, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		rest, ok := bytes.CutPrefix(data, []byte(spillHeader))
		for _, w := range want {
			var comment []byte
			comment, rest, _ = bytes.Cut(rest, []byte{'\n'})
			ok = ok && bytes.HasPrefix(comment, []byte("# "))
			ok = ok && bytes.HasPrefix(rest, w)
			rest = rest[min(len(w), len(rest)):]
		}
		if !ok || len(rest) > 0 {
			t.Errorf("dead-letter file %q, want its comments and %q", data, want)
		}
	})
}
