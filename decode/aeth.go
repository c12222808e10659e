package decode

import "strconv"

// AckKind is what an AETH syndrome says, from its bits 6-5. The zero value,
// AckNone, is never returned by [AETH.Kind]; it stands for "no AETH".
type AckKind uint8

// AETH syndrome kinds.
const (
	AckNone     AckKind = iota // no AETH
	AckACK                     // 00: positive acknowledgement; low bits are the credit count
	AckRNRNAK                  // 01: receiver not ready; low bits are the RNR timer
	AckReserved                // 10: reserved
	AckNAK                     // 11: negative acknowledgement; low bits are the NAK code
)

var ackKindNames = [...]string{"none", "ACK", "RNR NAK", "reserved", "NAK"}

// String returns "ACK", "RNR NAK", "reserved", "NAK" or "none".
func (k AckKind) String() string {
	if int(k) < len(ackKindNames) {
		return ackKindNames[k]
	}
	return "AckKind(" + strconv.Itoa(int(k)) + ")"
}

// NAKCode is the reason of a NAK, the low five bits of its syndrome. Every
// value is meaningful on the wire, so the zero value is
// NAKPSNSequenceError.
type NAKCode uint8

// NAK codes (IBTA table "AETH syndrome").
const (
	NAKPSNSequenceError  NAKCode = 0 // PSN sequence error: the responder saw a gap
	NAKInvalidRequest    NAKCode = 1
	NAKRemoteAccessError NAKCode = 2
	NAKRemoteOperational NAKCode = 3
	NAKInvalidRDRequest  NAKCode = 4

	maxNAKCode = NAKInvalidRDRequest
)

var nakCodeNames = [...]string{
	"PSN sequence error", "invalid request", "remote access error",
	"remote operational error", "invalid RD request",
}

// String returns the IBTA name of c, or "reserved" for codes 5-31.
func (c NAKCode) String() string {
	if c <= maxNAKCode {
		return nakCodeNames[c]
	}
	return "reserved"
}

// Kind returns what the syndrome says: ACK, RNR NAK, NAK or reserved.
func (a AETH) Kind() AckKind { return AckKind(a.Syndrome>>5&3) + AckACK }

// Credit returns the credit count of an ACK (the syndrome's low five bits).
func (a AETH) Credit() uint8 { return a.Syndrome & 0x1f }

// Timer returns the RNR NAK timer code (the syndrome's low five bits).
func (a AETH) Timer() uint8 { return a.Syndrome & 0x1f }

// NAKCode returns the reason of a NAK (the syndrome's low five bits).
func (a AETH) NAKCode() NAKCode { return NAKCode(a.Syndrome & 0x1f) }
