package clickhouse

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scheme is the URL scheme of a ClickHouse target:
// clickhouse://HOST:PORT/DATABASE, PORT being the HTTP interface's.
const Scheme = "clickhouse://"

// ErrTarget is wrapped by errors parsing a ClickHouse URL.
var ErrTarget = errors.New("invalid clickhouse target")

// Target is a ClickHouse database reached over HTTP, and where rows that
// cannot be inserted go.
type Target struct {
	Addr     string // host:port of the HTTP interface
	Database string
	// Spill is the private directory of the spill and dead-letter files;
	// empty means DefaultSpillDir.
	Spill string
	// TTL, a whole number of days, is how long rows are kept: the sink
	// drops the days (partitions) older than that. 0 keeps every row.
	TTL time.Duration
}

// IsURL reports whether s names a ClickHouse target rather than a path.
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme) }

var databaseName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseURL reads clickhouse://HOST[:PORT]/DATABASE[?spill=DIR][&ttl=Nd].
// The port defaults to 8123.
func ParseURL(s string) (*Target, error) {
	u, err := url.Parse(s)
	if err != nil || !IsURL(s) {
		return nil, fmt.Errorf("clickhouse: %q: want %sHOST:PORT/DATABASE: %w", s, Scheme, ErrTarget)
	}
	t := &Target{Addr: u.Host, Database: strings.TrimPrefix(u.Path, "/")}
	if u.Port() == "" {
		t.Addr = net.JoinHostPort(u.Hostname(), "8123")
	}
	if u.Hostname() == "" || !databaseName.MatchString(t.Database) {
		return nil, fmt.Errorf("clickhouse: %q: want %sHOST:PORT/DATABASE, the database a plain name: %w", s, Scheme, ErrTarget)
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains([]string{"spill", "ttl"}, k) {
			return nil, fmt.Errorf("clickhouse: %q: unknown parameter %q (want spill=DIR, ttl=DAYSd): %w", s, k, ErrTarget)
		}
	}
	t.Spill = q.Get("spill")
	if ttl := q.Get("ttl"); ttl != "" {
		days, err := strconv.Atoi(strings.TrimSuffix(ttl, "d"))
		if err != nil || !strings.HasSuffix(ttl, "d") || days <= 0 {
			return nil, fmt.Errorf("clickhouse: %q: ttl=%s: want a whole number of days, as ttl=30d: %w", s, ttl, ErrTarget)
		}
		t.TTL = time.Duration(days) * 24 * time.Hour
	}
	return t, nil
}
