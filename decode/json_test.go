package decode_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/decode"
)

func TestAppendJSON(t *testing.T) {
	cases := map[string]string{
		"RoCEv2 NAK, bytes by hand": `"kind":"rocev2","src":"10.0.0.1","dst":"10.0.0.2","sport":49152,"dport":4791,` +
			`"ecn":2,"dscp":0,"bth":{"opcode":17,"se":false,"m":true,"pad":0,"tver":0,"pkey":65535,"fecn":false,` +
			`"becn":false,"dqp":65,"a":false,"psn":1000},"aeth":{"syndrome":96,"msn":77},"payload_len":0,` +
			`"icrc":2712847316,"opcode_name":"RC Acknowledge"`,
		"IB GRH RNR NAK": `"kind":"ib","src":"fe80::1","dst":"fe80::2","lrh":{"vl":1,"lver":0,"sl":0,"lnh":3,` +
			`"dlid":34,"slid":17,"pktlen":17},"grh":{"ipver":6,"tclass":18,"flowlabel":344865,"paylen":20,` +
			`"nxthdr":27,"hoplmt":1,"sgid":"fe80::1","dgid":"fe80::2"},"bth":{"opcode":17,"se":false,"m":false,` +
			`"pad":0,"tver":0,"pkey":65535,"fecn":false,"becn":false,"dqp":86,"a":false,"psn":9},` +
			`"aeth":{"syndrome":46,"msn":4},"payload_len":0,"icrc":2712847316,"opcode_name":"RC Acknowledge"`,
		"IB UD SEND Only Immediate with pad, bytes by hand": `"kind":"ib","src":"lid:17","dst":"lid:34",` +
			`"lrh":{"vl":0,"lver":0,"sl":2,"lnh":2,"dlid":34,"slid":17,"pktlen":17},"bth":{"opcode":101,` +
			`"se":false,"m":false,"pad":2,"tver":0,"pkey":65535,"fecn":false,"becn":false,"dqp":87,"a":false,` +
			`"psn":1},"deth":{"qkey":1,"sqp":88},"immdt":153,"payload_len":30,"icrc":2712847316,` +
			`"opcode_name":"UD SEND Only with Immediate"`,
		"ERSPAN II": `"kind":"rocev2","src":"10.0.0.1","dst":"10.0.0.2","sport":49152,"dport":4791,"ecn":2,` +
			`"dscp":0,"mirror":{"type":"erspan2","session":300,"src":"10.0.0.1","dst":"10.0.0.2"},` +
			`"bth":{"opcode":17,"se":false,"m":false,"pad":0,"tver":0,"pkey":65535,"fecn":false,"becn":false,` +
			`"dqp":65,"a":false,"psn":9},"aeth":{"syndrome":46,"msn":3},"payload_len":0,"icrc":2712847316,` +
			`"opcode_name":"RC Acknowledge"`,
		"QinQ IPv6 with extension headers": `"kind":"rocev2","src":"fd00::1","dst":"fd00::2","sport":49152,` +
			`"dport":4791,"ecn":3,"dscp":3,"vlan":[100,200],"bth":{"opcode":4,"se":true,"m":false,"pad":3,` +
			`"tver":0,"pkey":65535,"fecn":true,"becn":false,"dqp":801,"a":true,"psn":5},"payload_len":61,` +
			`"icrc":2712847316,"opcode_name":"RC SEND Only"`,
		"CM ConnectRequest on QP1": `"kind":"rocev2","src":"10.0.0.1","dst":"10.0.0.2","sport":49152,` +
			`"dport":4791,"ecn":0,"dscp":0,"bth":{"opcode":100,"se":false,"m":false,"pad":0,"tver":0,` +
			`"pkey":65535,"fecn":false,"becn":false,"dqp":1,"a":true,"psn":1},"deth":{"qkey":2147549184,"sqp":1},` +
			`"cm":{"attr":16,"local_comm_id":168496141,"remote_comm_id":0,"local_qpn":43981,` +
			`"starting_psn":1193046},"payload_len":256,"icrc":2712847316,"opcode_name":"UD SEND Only"`,
		"PFC":          `"kind":"pfc","pfc":{"enable":137,"quanta":[65535,0,0,100,0,0,0,1]}`,
		"802.3x pause": `"kind":"pause","pause":{"quanta":4660}`,
		"ARP":          `"kind":"other"`,
		"reserved opcode 0x15 in RC": `"kind":"rocev2","src":"10.0.0.1","dst":"10.0.0.2","sport":49152,` +
			`"dport":4791,"ecn":2,"dscp":0,"bth":{"opcode":21,"se":false,"m":true,"pad":0,"tver":0,` +
			`"pkey":65535,"fecn":false,"becn":false,"dqp":65,"a":false,"psn":1000},` +
			`"opcode_name":"Opcode(0x15)","error":"decode: reserved or unknown BTH opcode"`,
	}
	seen := 0
	for _, c := range decodeCases(t) {
		want, ok := cases[c.name]
		if !ok {
			continue
		}
		seen++
		var p decode.Packet
		_ = (&decode.Decoder{RoCEPort: c.port}).Decode(&p, c.frame, c.link)
		got := string(p.AppendJSON([]byte("prefix:")))
		if got != "prefix:"+want {
			t.Errorf("%s:\n got %s\nwant prefix:%s", c.name, got, want)
		}
	}
	if seen != len(cases) {
		t.Errorf("%d of %d cases found", seen, len(cases))
	}
}

// checkJSON checks that the dump object built around p's JSON is valid and
// has exactly the members p's headers call for.
func checkJSON(tb testing.TB, name string, p *decode.Packet, buf []byte) {
	tb.Helper()
	obj := append(p.AppendJSON(append(buf[:0], `{"frame":1,"len":2,"caplen":3,`...)), '}')
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		tb.Fatalf("%s: invalid JSON %s: %v", name, obj, err)
	}
	has := func(h decode.Header) bool { return p.Headers&h != 0 }
	for key, want := range map[string]bool{
		"kind": true, "bth": has(decode.HasBTH), "opcode_name": has(decode.HasBTH), "reth": has(decode.HasRETH),
		"aeth": has(decode.HasAETH), "deth": has(decode.HasDETH), "rdeth": has(decode.HasRDETH),
		"xrceth": has(decode.HasXRCETH), "atomic": has(decode.HasAtomicETH), "atomic_ack": has(decode.HasAtomicAckETH),
		"immdt": has(decode.HasImmDt), "ieth": has(decode.HasIETH), "lrh": has(decode.HasLRH), "grh": has(decode.HasGRH),
		"cm": has(decode.HasCM), "pfc": has(decode.HasPFC), "pause": has(decode.HasPause), "icrc": has(decode.HasICRC),
		"mirror": has(decode.HasMirror), "vlan": has(decode.HasVLAN), "sport": has(decode.HasUDP),
		"src": has(decode.HasIPv4 | decode.HasIPv6 | decode.HasLRH | decode.HasGRH), "error": p.Err != 0,
		"payload_len": has(decode.HasBTH) && p.Err == 0,
	} {
		if _, ok := m[key]; ok != want {
			tb.Errorf("%s: key %q present %v, want %v in %s", name, key, ok, want, obj)
		}
	}
	if m["kind"] != p.Kind.String() {
		tb.Errorf("%s: kind %v, want %v", name, m["kind"], p.Kind)
	}
}

func TestAppendJSONValid(t *testing.T) {
	buf := make([]byte, 0, 4096)
	var p decode.Packet
	for _, c := range decodeCases(t) {
		_ = (&decode.Decoder{RoCEPort: c.port}).Decode(&p, c.frame, c.link)
		checkJSON(t, c.name, &p, buf)
	}
	for _, f := range append(testdataFiles(t), corpusFilesIfAny(t)...) {
		link, recs, err := readPcap(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			_ = p.Decode(r.data, link)
			checkJSON(t, f, &p, buf)
		}
	}
}

func TestAppendJSONEscapesNothing(t *testing.T) {
	// Every string AppendJSON writes is an address, an opcode name, a kind,
	// a mirror type or an error message; none needs escaping.
	var names []string
	for i := 0; i < 256; i++ {
		names = append(names, decode.Opcode(i).String())
	}
	for e := decode.Error(1); e < 20; e++ {
		names = append(names, e.Error())
	}
	for _, s := range names {
		if strings.ContainsAny(s, "\"\\") || strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
			t.Errorf("%q needs JSON escaping", s)
		}
	}
}
