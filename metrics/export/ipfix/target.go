package ipfix

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Schemes of IPFIX URLs: UDP (the collectors' default) and TCP.
const (
	Scheme    = "ipfix://"
	SchemeTCP = "ipfix+tcp://"
)

// DefaultPort is the IANA port of IPFIX.
const DefaultPort = "4739"

// Target is a collector and the options its URL sets.
type Target struct {
	Network string // "udp" or "tcp"
	Addr    string // host:port
	Options Options
}

// IsURL reports whether s names an IPFIX collector.
func IsURL(s string) bool {
	return strings.HasPrefix(s, Scheme) || strings.HasPrefix(s, SchemeTCP) || strings.HasPrefix(s, "ipfix+udp://")
}

// urlParams are the query parameters ParseURL takes.
var urlParams = []string{"pen", "domain", "max-message-bytes", "template-refresh", "template-refresh-messages", "max-rate"}

// ParseURL reads ipfix://HOST[:PORT] (UDP), ipfix+udp:// or ipfix+tcp://,
// with the options as query parameters: pen (the enterprise number of the
// enterprise elements), domain (the observation domain ID),
// max-message-bytes, template-refresh (a duration),
// template-refresh-messages and max-rate (messages per second). The port
// defaults to 4739.
func ParseURL(s string) (*Target, error) {
	u, err := url.Parse(s)
	if err != nil || !IsURL(s) || u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("ipfix: %q: want %sHOST:PORT or %sHOST:PORT: %w", s, Scheme, SchemeTCP, ErrTarget)
	}
	t := &Target{Network: "udp", Addr: u.Host}
	if u.Scheme == "ipfix+tcp" {
		t.Network = "tcp"
	}
	if u.Port() == "" {
		t.Addr = net.JoinHostPort(u.Hostname(), DefaultPort)
	}
	o := &t.Options
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		var err error
		switch k {
		case "pen":
			o.PEN, err = parseUint32(v, 1)
		case "domain":
			o.Domain, err = parseUint32(v, 1)
		case "max-message-bytes":
			o.MaxMessageBytes, err = strconv.Atoi(v)
		case "template-refresh":
			o.TemplateRefresh, err = time.ParseDuration(v)
			if err == nil && o.TemplateRefresh <= 0 {
				err = fmt.Errorf("want more than 0")
			}
		case "max-rate":
			o.MaxRate, err = strconv.Atoi(v)
		case "template-refresh-messages":
			o.TemplateRefreshMessages, err = strconv.Atoi(v)
			if err == nil && o.TemplateRefreshMessages <= 0 {
				err = fmt.Errorf("want more than 0")
			}
		default:
			return nil, fmt.Errorf("ipfix: %q: unknown parameter %q (known: %s): %w", s, k, strings.Join(urlParams, ", "), ErrTarget)
		}
		if err != nil {
			return nil, fmt.Errorf("ipfix: %q: %s=%q: %v: %w", s, k, v, err, ErrTarget)
		}
	}
	if _, err := o.withDefaults(); err != nil {
		return nil, fmt.Errorf("ipfix: %q: %w", s, err)
	}
	return t, nil
}

// parseUint32 reads a decimal number of at least lo that fits 32 bits.
func parseUint32(s string, lo uint64) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v < lo {
		return 0, fmt.Errorf("want a number from %d to %d", lo, uint32(1<<32-1))
	}
	return uint32(v), nil
}
