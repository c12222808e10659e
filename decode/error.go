package decode

import "strconv"

// Error codes besides [ErrTruncated]. Each names the header whose bytes are
// not valid; every code but ErrTruncated means "malformed".
const (
	ErrLinkType  Error = iota + 2 // the link type is not one the decoder supports
	ErrERF                        // no longer given (an ERF record's length field is not used); kept so the codes after it keep their numbers
	ErrIPVersion                  // raw IP link: version nibble is neither 4 nor 6
	ErrIPv4                       // IPv4 header: version, IHL below 5, or total length below the header
	ErrIPv6                       // IPv6 header: version, or an extension header longer than the payload
	ErrUDP                        // UDP length below 8, beyond the IP payload, or too short for the transport headers
	ErrMirror                     // GRE or ERSPAN header: GRE version or routing, ERSPAN version
	ErrLRH                        // LRH packet length too short for the headers it announces
	ErrGRH                        // RoCEv1 GRH payload length too short for the transport headers
	ErrOpcode                     // BTH opcode reserved or vendor-specific: its headers are unknown
	ErrPad                        // BTH pad count larger than the payload

	maxError = ErrPad
)

var errorText = [...]string{
	ErrTruncated: "decode: truncated",
	ErrLinkType:  "decode: unsupported link type",
	ErrERF:       "decode: bad ERF record",
	ErrIPVersion: "decode: bad IP version",
	ErrIPv4:      "decode: bad IPv4 header",
	ErrIPv6:      "decode: bad IPv6 header or extension header chain",
	ErrUDP:       "decode: bad UDP length",
	ErrMirror:    "decode: bad GRE or ERSPAN header",
	ErrLRH:       "decode: bad LRH packet length",
	ErrGRH:       "decode: bad GRH payload length",
	ErrOpcode:    "decode: reserved or unknown BTH opcode",
	ErrPad:       "decode: pad count larger than the payload",
}

// Error returns the lowercase message for e, such as "decode: truncated".
func (e Error) Error() string {
	if e != 0 && e <= maxError {
		return errorText[e]
	}
	return "decode: error " + strconv.Itoa(int(e))
}

// Truncated reports whether e is [ErrTruncated]: the frame was cut before
// the headers it announces. Every other non-zero code means malformed.
func (e Error) Truncated() bool { return e == ErrTruncated }
