// Package tsharktest runs tshark for the tests that compare rocescope with
// Wireshark, and caches what it prints, so that an everyday test run does
// not start tshark at all.
//
// # Cache
//
// [Run] keeps tshark's standard output (and, for a run that failed, its
// exit status and standard error) in os.UserCacheDir()/rocescope-tshark,
// one entry per run, named by the SHA-256 of tshark's version line, the
// arguments and the bytes of the capture file: a changed file, argument
// or tshark version is a miss and runs tshark again; the path of the file
// does not matter. Entries are written to a temporary name and renamed,
// so tests of several packages may share the directory. Remove it to
// clear the cache; nothing else expires entries.
//
// The environment variable ROCESCOPE_TSHARK_CACHE set to "off" runs
// tshark every time; set to a directory, it holds the cache instead. A
// directory that cannot be written only costs speed.
//
// Nothing here is safe to use outside tests: every failure to run tshark
// fails the test.
package tsharktest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Failure is the error of a tshark run that exited with a non-zero
// status: tshark read the file but reported a problem (a damaged file,
// for instance).
type Failure struct {
	Status int    // exit status
	Stderr string // what tshark printed on standard error
}

// Error returns "tshark: exit status N: <standard error>".
func (f *Failure) Error() string {
	return fmt.Sprintf("tshark: exit status %d: %s", f.Status, strings.TrimSpace(f.Stderr))
}

// Require skips the test when tshark is not installed.
func Require(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		tb.Skip("tshark not installed; install Wireshark's tshark (4.0) to compare with Wireshark")
	}
}

// Run returns what `tshark -r path args...` prints on standard output,
// from the cache when it holds the run. A run in which tshark exits with
// a non-zero status returns its output and a *Failure. Run skips the test
// when tshark is not installed and fails it when tshark cannot be run.
func Run(tb testing.TB, path string, args ...string) ([]byte, error) {
	tb.Helper()
	Require(tb)
	file, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("tshark input: %v", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00", version(tb), len(args))
	for _, a := range args {
		fmt.Fprintf(h, "%d:%s\x00", len(a), a)
	}
	h.Write(file)
	entry := ""
	if dir := cacheDir(); dir != "" {
		entry = filepath.Join(dir, hex.EncodeToString(h.Sum(nil)))
		if out, fail, ok := load(entry); ok {
			return result(out, fail)
		}
	}

	cmd := exec.Command("tshark", append([]string{"-r", path}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var fail *Failure
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		fail = &Failure{Status: exit.ExitCode(), Stderr: stderr.String()}
	case err != nil:
		tb.Fatalf("tshark %s: %v", path, err)
	}
	if entry != "" {
		store(entry, out, fail)
	}
	return result(out, fail)
}

// result returns out and fail, as a nil error when fail is nil.
func result(out []byte, fail *Failure) ([]byte, error) {
	if fail != nil {
		return out, fail
	}
	return out, nil
}

// versions memoizes tshark's version line by the path of the binary.
var versions sync.Map

// version returns the first line of `tshark --version`, run once per
// process and tshark binary.
func version(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		tb.Fatalf("tshark: %v", err)
	}
	if v, ok := versions.Load(bin); ok {
		return v.(string)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		tb.Fatalf("tshark --version: %v", err)
	}
	v, _, _ := strings.Cut(string(out), "\n")
	versions.Store(bin, v)
	return v
}

// cacheDir returns the cache directory, created if need be, or "" when
// there is none.
func cacheDir() string {
	dir := os.Getenv("ROCESCOPE_TSHARK_CACHE")
	switch dir {
	case "off":
		return ""
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(base, "rocescope-tshark")
	}
	if os.MkdirAll(dir, 0o755) != nil {
		return ""
	}
	return dir
}

// An entry is entry.out, tshark's standard output, and for a failed run
// entry.fail beside it, written first: the exit status, a newline and the
// standard error.

// load reads a cache entry, reporting whether there was one.
func load(entry string) (out []byte, fail *Failure, ok bool) {
	out, err := os.ReadFile(entry + ".out")
	if err != nil {
		return nil, nil, false
	}
	f, err := os.ReadFile(entry + ".fail")
	if errors.Is(err, os.ErrNotExist) {
		return out, nil, true
	}
	status, stderr, _ := strings.Cut(string(f), "\n")
	n, convErr := strconv.Atoi(status)
	if err != nil || convErr != nil {
		return nil, nil, false
	}
	return out, &Failure{Status: n, Stderr: stderr}, true
}

// store writes a cache entry; failing to only costs speed.
func store(entry string, out []byte, fail *Failure) {
	if fail != nil && write(entry+".fail", []byte(strconv.Itoa(fail.Status)+"\n"+fail.Stderr)) != nil {
		return
	}
	write(entry+".out", out)
}

// write writes b to path through a temporary file and a rename, so that
// a reader never sees part of it.
func write(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
