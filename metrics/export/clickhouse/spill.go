package clickhouse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rocescope/rocescope/metrics/export"
)

// Spill files. A sink spills the rows it cannot insert into a file of its
// own, <run>.spill, in a private directory: created 0700, and refused
// unless it is a directory (not a link) of this user that no one else
// may write. Files are opened without following links and must be
// regular files of this user; the file a sink writes is created under a
// hidden name, locked (flock) and only then named *.spill, and stays
// locked while the sink runs, so that another sink does not load it.
//
// A spill file is text: the header line, then one line per row, the
// table's name, a tab and the row in JSONEachRow; a window's row comes
// before its flows. Lines starting with # are comments. Rows the server
// refuses for good go to a dead-letter file, <run>.refused, in the same
// format, each window after a comment that says why; a sink never loads
// those (rename one to *.spill to have the next run try its rows again).

// spillHeader is the first line of a spill or dead-letter file.
const spillHeader = "#rocescope clickhouse spill v1\n"

// Suffixes of the files in a spill directory.
const (
	spillSuffix   = ".spill"
	refusedSuffix = ".refused"
)

// errNotPrivate is wrapped when a spill directory or file could be
// another user's.
var errNotPrivate = errors.New("not private to this user")

// spillDir is a sink's spill directory.
type spillDir struct {
	path string
	run  string // this run's name: its start time and process id

	mu      sync.Mutex
	made    bool       // path exists and was checked
	own     *spillFile // this run's spill file, once it spilled
	refused *spillFile // this run's dead-letter file, once it refused rows
}

// spillFile is a spill or dead-letter file, open and locked.
type spillFile struct {
	f    *os.File
	path string
}

// openSpillDir returns the spill directory at path, checking it if it
// exists; it is made when the sink first spills.
func openSpillDir(path string) (*spillDir, error) {
	d := &spillDir{path: path, run: time.Now().UTC().Format("20060102T150405.000000000Z") + "-" + strconv.Itoa(os.Getpid())}
	switch err := checkPrivateDir(path); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		d.made = true
	}
	return d, nil
}

// ensure makes the directory if need be. d.mu is held.
func (d *spillDir) ensure() error {
	if d.made {
		return nil
	}
	if err := os.MkdirAll(d.path, 0o700); err != nil {
		return fmt.Errorf("spill directory: %w", err)
	}
	if err := checkPrivateDir(d.path); err != nil {
		return err
	}
	d.made = true
	return nil
}

// create makes this run's file with suffix, locked, its header written.
// d.mu is held.
func (d *spillDir) create(suffix string) (*spillFile, error) {
	if err := d.ensure(); err != nil {
		return nil, err
	}
	name := filepath.Join(d.path, d.run+suffix)
	tmp := filepath.Join(d.path, "."+d.run+suffix+".tmp")
	f, err := openPrivateFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err = lockFile(f); err == nil {
		if _, err = f.WriteString(spillHeader); err == nil {
			err = f.Sync()
		}
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err == nil {
		err = export.SyncPath(d.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return &spillFile{f: f, path: name}, nil
}

// spill appends the rows of b to this run's spill file and syncs it; it
// returns the file's path.
func (d *spillDir) spill(b *batch) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.write(&d.own, spillSuffix, appendSpillLines(nil, b))
}

// refuse appends the rows of b to this run's dead-letter file, after a
// comment saying why, and syncs it; it returns the file's path.
func (d *spillDir) refuse(b *batch, why string) (string, error) {
	return d.refuseText(appendSpillLines(nil, b), why)
}

// refuseText appends text, lines in the spill format or what a crash
// left of one, to this run's dead-letter file after a comment saying why,
// and syncs it; it returns the file's path.
func (d *spillDir) refuseText(text []byte, why string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := fmt.Appendf(nil, "# %s %s\n", time.Now().UTC().Format(time.RFC3339), strings.ReplaceAll(why, "\n", " "))
	b = append(b, text...)
	if len(text) > 0 && text[len(text)-1] != '\n' {
		b = append(b, '\n')
	}
	return d.write(&d.refused, refusedSuffix, b)
}

// write appends b to *f, this run's file with suffix, made if need be,
// and syncs it. d.mu is held.
func (d *spillDir) write(f **spillFile, suffix string, b []byte) (string, error) {
	if *f == nil {
		nf, err := d.create(suffix)
		if err != nil {
			return d.path, err
		}
		*f = nf
	}
	if _, err := (*f).f.Write(b); err != nil {
		return (*f).path, err
	}
	return (*f).path, (*f).f.Sync()
}

// appendSpillLines appends the rows of b, window by window, in the spill
// format.
func appendSpillLines(out []byte, b *batch) []byte {
	var from [numTables]int
	for _, w := range b.wins {
		for t := range numTables {
			for row := range bytes.Lines(b.rows[t][from[t]:w.end[t]]) {
				out = append(append(append(out, tables[t].name...), '\t'), row...)
			}
			from[t] = w.end[t]
		}
	}
	return out
}

// load reads the spill files of earlier runs, oldest first, each as one
// batch, and keeps them locked until done. A file that could be another
// user's, or that another running sink holds, is left alone, and so is
// what is not a spill file; a torn last line (a crash cut it) goes to the
// dead-letter file and the file is cut to its last whole row. warn says
// what was left alone or refused.
func (d *spillDir) load(warn func(format string, args ...any)) ([]*batch, error) {
	if !d.made {
		return nil, nil
	}
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("spill directory: %w", err)
	}
	var out []*batch
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), spillSuffix) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(d.path, e.Name())
		b, err := d.loadFile(path, warn)
		if err != nil {
			warn("%v: left alone", err)
			continue
		}
		if b != nil {
			out = append(out, b)
		}
	}
	return out, nil
}

// loadFile reads the spill file at path; nil if another sink holds it.
func (d *spillDir) loadFile(path string, warn func(format string, args ...any)) (*batch, error) {
	f, err := openPrivateFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	ok, err := lockFile(f)
	if err != nil || !ok {
		f.Close()
		if err == nil {
			warn("%s: another rocescope is writing or loading it: left to it", path)
		}
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err == nil && !bytes.HasPrefix(data, []byte(spillHeader)) {
		err = fmt.Errorf("%s: not a rocescope spill file (its first line is %.40q)", path, firstLine(data))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	sf := &spillFile{f: f, path: path}
	if cut := bytes.LastIndexByte(data, '\n') + 1; cut < len(data) {
		torn := data[cut:]
		where, err := d.refuseText(torn, fmt.Sprintf("the last %d bytes of %s, cut by a crash", len(torn), path))
		if err == nil {
			err = f.Truncate(int64(cut))
		}
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: torn last line: %w", path, err)
		}
		warn("%s: its last line was cut by a crash (%d bytes, not a whole row): kept in %s; loading the %d bytes before it", path, len(torn), where, cut)
		data = data[:cut]
	}
	b := &batch{file: sf}
	var bad []byte
	for line := range bytes.Lines(data[len(spillHeader):]) {
		if line[0] == '#' {
			continue
		}
		tab := bytes.IndexByte(line, '\t')
		t := slices.IndexFunc(tables, func(t table) bool { return tab > 0 && string(line[:tab]) == t.name })
		if t < 0 {
			bad = append(bad, line...)
			continue
		}
		row := line[tab+1:]
		if t == tWindows || len(b.wins) == 0 {
			start, _ := rowStart(row)
			b.wins = append(b.wins, window{start: start})
			if n := len(b.wins); n > 1 {
				b.wins[n-1].end = b.wins[n-2].end
			}
		}
		b.rows[t] = append(b.rows[t], row...)
		b.wins[len(b.wins)-1].end[t] = len(b.rows[t])
	}
	if bad != nil {
		where, err := d.refuseText(bad, "lines of "+path+" that are not rows")
		if err != nil {
			f.Close()
			return nil, err
		}
		warn("%s: %d lines are not rows of a table: kept in %s", path, bytes.Count(bad, []byte{'\n'}), where)
	}
	return b, nil
}

// firstLine returns the first line of b.
func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

// done removes a loaded spill file, whose rows are all inserted, refused
// or spilled again, and unlocks it.
func (d *spillDir) done(sf *spillFile) error {
	err := os.Remove(sf.path)
	if err == nil {
		err = export.SyncPath(d.path)
	}
	return errors.Join(err, sf.f.Close())
}

// close closes this run's files, which unlocks them.
func (d *spillDir) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, f := range []*spillFile{d.own, d.refused} {
		if f != nil {
			errs = append(errs, f.f.Close())
		}
	}
	d.own, d.refused = nil, nil
	return errors.Join(errs...)
}

// DefaultSpillDir returns the spill directory of a target whose URL names
// none: rocescope/clickhouse/HOST_PORT-DATABASE in the directory systemd
// gives a service ($STATE_DIRECTORY), else in the user's state directory
// ($XDG_STATE_HOME, by default ~/.local/state).
func DefaultSpillDir(t *Target) (string, error) {
	base, _, _ := strings.Cut(os.Getenv("STATE_DIRECTORY"), ":")
	if base == "" {
		base = os.Getenv("XDG_STATE_HOME")
	}
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no directory for the spill files (%w): give the URL ?spill=DIR", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	name := strings.NewReplacer(":", "_", "/", "_", "[", "", "]", "").Replace(t.Addr) + "-" + t.Database
	return filepath.Join(base, "rocescope", "clickhouse", name), nil
}
