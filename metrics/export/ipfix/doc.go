// Package ipfix exports rocescope's per-window flow records to IPFIX
// collectors (RFC 7011): goflow2, pmacct/nfacctd, Akvorado, ntopng,
// Elastiflow, and anything else that reads IPFIX over UDP or TCP.
//
// # Records
//
// Each window becomes one data record per flow its QP tables held
// ([metrics.Window.Flows]); flows only the sketches saw have no record.
// Standard IANA elements carry what IANA has numbers for (addresses,
// ports, protocol, octets, packets, flow start and end); RoCE figures
// (destination and source QP, the opcode mix, CNP, ECN-CE, NAKs,
// retransmissions, PSN gaps, latencies) are enterprise-specific elements
// numbered by rocescope under a Private Enterprise Number ([Options.PEN],
// default [DefaultPEN]). [Elements] lists them all; docs/ipfix.md is the
// list for collectors. There are eight templates: IPv4, IPv6, GID
// (RoCEv1, InfiniBand with a GRH) and LID addresses, each with and without
// the source QP, which a flow has only when it is known.
//
// # Messages
//
// A message holds at most [Options.MaxMessageBytes] bytes. A window's
// records fill as few messages as they can, grouped by template, and a
// window never shares a message with the next. The sequence number of a
// message is the count of data records sent before it in the transport
// session and observation domain, modulo 2^32; records of a message that
// could not be sent count too, so a collector sees the loss. Over UDP a
// template is sent again before its next record once
// [Options.TemplateRefresh] has passed or [Options.TemplateRefreshMessages]
// messages were sent since the last refresh; over TCP each template is
// sent once per connection.
//
// # Concurrency
//
// An [Exporter] is fed by one goroutine; Write encodes and sends a
// window's messages before it returns, and allocates nothing per record
// once its buffers have grown.
package ipfix
