// Package freeport picks ports on 127.0.0.1, free for both TCP and UDP, for
// the servers tests start (ClickHouse, kfake brokers, IPFIX collectors),
// below the kernel's range of ephemeral ports: a port from that range, free
// when picked, can be taken by any outgoing connection before the server
// binds it, or again while a test restarts the server on the same port, and
// a client redialing a port nothing listens on can even connect to itself
// through it.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
)

// lowest is the lowest port picked, above the well-known and most
// registered service ports.
const lowest = 20000

// picked are the ports Pick returned in this process, which it does not
// return again: two picked for one server must differ although neither is
// bound yet.
var picked struct {
	sync.Mutex
	ports map[int]bool
}

// Pick returns a port on 127.0.0.1 that is free now for TCP and UDP, outside the ephemeral
// range and not returned before in this process, and fails tb if it finds
// none.
func Pick(tb testing.TB) int {
	tb.Helper()
	picked.Lock()
	defer picked.Unlock()
	if picked.ports == nil {
		picked.ports = make(map[int]bool)
	}
	high := ephemeralLow()
	for range 100 {
		port := lowest + rand.IntN(high-lowest)
		if picked.ports[port] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken
		}
		l.Close()
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue // taken for UDP
		}
		c.Close()
		picked.ports[port] = true
		return port
	}
	tb.Fatalf("freeport: no free port in [%d, %d) after 100 tries", lowest, high)
	return 0
}

// ephemeralLow returns the first port of the kernel's ephemeral range, or
// Linux's default where the range cannot be read.
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var lo, hi int
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil && lo > lowest+1000 {
			low = lo
		}
	}
	return low
}
