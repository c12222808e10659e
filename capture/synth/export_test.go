package synth

// ICRC exports icrc to the tests: the invariant CRC of the RoCEv2 packet in
// b with its IP header at ipOff and UDP header at udpOff, covering the
// bytes up to end.
func ICRC(b []byte, ipOff, udpOff, end int, v6 bool) uint32 {
	var h [icrcHeaders]byte
	return icrc(&h, b, ipOff, udpOff, end, v6)
}
