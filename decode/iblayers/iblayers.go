// Package iblayers provides gopacket layers for RoCE, so that gopacket
// users can decode RoCE with gopacket.DecodingLayerParser or
// gopacket.NewPacket. The layers are thin wrappers around the decode
// package, which rocescope's hot path uses directly.
//
// Importing the package registers, at init:
//
//   - LayerTypeGRH (1791), the InfiniBand global route header, on ethertype
//     0x8915 (RoCEv1) in layers.EthernetTypeMetadata;
//   - LayerTypeBTH (1792), the base transport header with the extension
//     headers its opcode implies, on UDP port 4791 (RoCEv2) with
//     layers.RegisterUDPPortLayerType, and after a GRH whose next header
//     is 0x1B.
//
// A BTH layer takes the bytes it is given as the whole transport packet,
// through the ICRC: gopacket's UDP layer bounds them by the UDP length, but
// for a frame cut short by the snap length the payload length and ICRC it
// reports are those of the cut packet. Layers are not safe for concurrent
// use; a DecodingLayerParser reuses them frame after frame.
package iblayers

import (
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/rocescope/rocescope/decode"
)

// Layer types, registered in the range gopacket leaves to applications.
var (
	LayerTypeGRH = gopacket.RegisterLayerType(1791, gopacket.LayerTypeMetadata{
		Name: "InfiniBand GRH", Decoder: gopacket.DecodeFunc(decodeGRH)})
	LayerTypeBTH = gopacket.RegisterLayerType(1792, gopacket.LayerTypeMetadata{
		Name: "InfiniBand BTH", Decoder: gopacket.DecodeFunc(decodeBTH)})
)

// EthernetTypeRoCEv1 is the ethertype of RoCEv1 frames.
const EthernetTypeRoCEv1 layers.EthernetType = 0x8915

func init() {
	layers.RegisterUDPPortLayerType(decode.DefaultRoCEPort, LayerTypeBTH)
	layers.EthernetTypeMetadata[EthernetTypeRoCEv1] = layers.EnumMetadata{
		DecodeWith: gopacket.DecodeFunc(decodeGRH), Name: "RoCEv1", LayerType: LayerTypeGRH}
}

var (
	_ gopacket.DecodingLayer = (*GRH)(nil)
	_ gopacket.DecodingLayer = (*BTH)(nil)
)

// GRH is the InfiniBand global route header at the start of a RoCEv1
// frame's payload. Its Payload is the transport packet, bounded by PayLen.
type GRH struct {
	layers.BaseLayer
	decode.GRH
}

// LayerType returns LayerTypeGRH.
func (g *GRH) LayerType() gopacket.LayerType { return LayerTypeGRH }

// CanDecode returns LayerTypeGRH.
func (g *GRH) CanDecode() gopacket.LayerClass { return LayerTypeGRH }

// NextLayerType returns LayerTypeBTH when the next header is 0x1B (IBA
// transport), else gopacket.LayerTypePayload.
func (g *GRH) NextLayerType() gopacket.LayerType {
	if g.NxtHdr == 0x1B {
		return LayerTypeBTH
	}
	return gopacket.LayerTypePayload
}

// DecodeFromBytes decodes the GRH at the start of data, which the layer
// then aliases. It returns decode.ErrTruncated when data is shorter than
// 40 bytes.
func (g *GRH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	h, err := decode.ParseGRH(data)
	if err != nil {
		df.SetTruncated()
		return err
	}
	const n = 40
	end := n + int(h.PayLen)
	if end > len(data) {
		end = len(data)
	}
	g.GRH = h
	g.BaseLayer = layers.BaseLayer{Contents: data[:n], Payload: data[n:end]}
	return nil
}

func decodeGRH(data []byte, p gopacket.PacketBuilder) error {
	g := &GRH{}
	if err := g.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(g)
	return p.NextDecoder(g.NextLayerType())
}

// BTH is the InfiniBand base transport header with the extension headers
// its opcode implies. Packet holds them: its Headers say which are present,
// and PayloadLen, Payload and ICRC describe the rest of the transport
// packet; the link and network fields of Packet are not set. The layer's
// Contents are the headers, its Payload the RDMA payload (without pad and
// ICRC).
type BTH struct {
	layers.BaseLayer
	Packet decode.Packet
}

// LayerType returns LayerTypeBTH.
func (b *BTH) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode returns LayerTypeBTH.
func (b *BTH) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns gopacket.LayerTypePayload.
func (b *BTH) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes decodes data as a transport packet, BTH through ICRC,
// with [decode.Packet.DecodeTransport], and returns its error.
func (b *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := b.Packet.DecodeTransport(data); err != nil {
		if b.Packet.Err.Truncated() {
			df.SetTruncated()
		}
		return err
	}
	hl := cap(data) - cap(b.Packet.Payload) // Payload aliases data
	b.BaseLayer = layers.BaseLayer{Contents: data[:hl], Payload: b.Packet.Payload}
	return nil
}

func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	b := &BTH{}
	if err := b.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(b)
	return p.NextDecoder(b.NextLayerType())
}
