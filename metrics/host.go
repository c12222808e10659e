package metrics

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxHost bounds the length of a host name, in bytes.
const MaxHost = 128

// ErrHost is wrapped by the errors of [CheckHost].
var ErrHost = errors.New("invalid host name")

// CheckHost checks a host name as reports and state files carry it: 1 to
// MaxHost bytes of printable characters, no space, no comma (reports join
// the names of a merged window's hosts with commas), and not beginning
// with a character a spreadsheet takes for the start of a formula (=, +,
// - or @), so that the name can go raw into a terminal, a CSV cell or a
// file name. The error quotes the name with Go escapes.
func CheckHost(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("host name is empty: %w", ErrHost)
	case len(h) > MaxHost:
		return fmt.Errorf("host name of %d bytes, want at most %d: %w", len(h), MaxHost, ErrHost)
	case strings.ContainsAny(h[:1], "=+-@"):
		return fmt.Errorf("host %q: want a name that does not begin with =, +, - or @: %w", h, ErrHost)
	}
	for _, r := range h {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) || r == utf8.RuneError || r == ',' {
			return fmt.Errorf("host %q: want printable characters without spaces or commas: %w", h, ErrHost)
		}
	}
	return nil
}
