//go:build pcap

package main

import "github.com/rocescope/rocescope/capture/libpcap"

func init() {
	openPcap = func(iface string, all bool) (live, error) {
		return libpcap.Open(iface, &libpcap.Config{All: all})
	}
}
