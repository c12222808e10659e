//go:build !pcap

package filter

// compile compiles with this package's own compiler; a build with the
// pcap tag uses libpcap's.
func compile(text string) (*Expr, error) { return compilePure(text) }
