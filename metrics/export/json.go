package export

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// jsonObject appends the members of one JSON object to a byte slice,
// writing the separators itself. Reports are built once per window, but a
// window with --exact can hold a million flows, so the writer appends into
// one buffer instead of going through reflection.
type jsonObject struct {
	b     []byte
	first bool
}

func openObject(b []byte) jsonObject { return jsonObject{b: append(b, '{'), first: true} }

func (o *jsonObject) close() []byte { return append(o.b, '}') }

func (o *jsonObject) key(k string) {
	if !o.first {
		o.b = append(o.b, ',')
	}
	o.first = false
	o.b = appendJSONString(o.b, k)
	o.b = append(o.b, ':')
}

func (o *jsonObject) uint(k string, v uint64) {
	o.key(k)
	o.b = strconv.AppendUint(o.b, v, 10)
}

func (o *jsonObject) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *jsonObject) float(k string, v float64) {
	o.key(k)
	o.b = AppendFloat(o.b, v)
}

func (o *jsonObject) bool(k string, v bool) {
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
}

func (o *jsonObject) string(k, v string) {
	o.key(k)
	o.b = appendJSONString(o.b, v)
}

// text writes what f appends as a JSON string; f must not append
// characters that need escaping (addresses, numbers).
func (o *jsonObject) text(k string, f func([]byte) []byte) {
	o.key(k)
	o.b = append(o.b, '"')
	o.b = f(o.b)
	o.b = append(o.b, '"')
}

// AppendFloat appends v the one way every report format writes a float
// (JSON lines, CSV, the HTML page's figures): in plain decimal notation,
// never in exponent form, with the fewest digits that read back as v
// exactly, so that a whole value has no fraction ("66432680",
// "15318545.936391562", "0.00035"). NaN and infinities, which JSON cannot
// hold, become null.
func AppendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

// AppendJSONString appends s as a JSON string, escaping what JSON
// requires and replacing invalid UTF-8, as every report key is written.
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s) }

// appendJSONString appends s as a JSON string, escaping what JSON
// requires and replacing invalid UTF-8.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
