package synth

// ICRC exports icrc to the tests: the invariant CRC of the RoCEv2 packet in
// b with its IP header at ipOff and UDP header at udpOff, covering the
// bytes up to end.
var ICRC = icrc
