package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
	"github.com/rocescope/rocescope/capture/filter"
	"github.com/rocescope/rocescope/decode"
)

func dumpCommand() *command {
	return &command{
		name:    "dump",
		args:    "FILE...",
		summary: "print every RoCE/IB frame's headers as JSON lines",
		about: `Dump prints one JSON object per RoCE or InfiniBand frame, keyed by the frame's
1-based position in its file: lengths, addresses, ports, VLANs, DSCP/ECN,
the mirror session, and every transport header (bth, reth, aeth, deth,
atomic, atomic_ack, immdt, ieth, lrh, grh, cm), the same facts Wireshark's
infiniband dissector shows, so the two can be compared field by field.
Frames that fail to decode are printed too, with "error". With several
files each object also has "file". With a filter, standard error says at
the end how many frames it removed.
` + filterHelp,
		example: `  rocescope dump trace.pcap | head
  rocescope dump --all trace.pcap          # also non-RoCE frames (PFC, ARP, ...)
  rocescope dump trace.pcap | jq 'select(.bth.opcode == 17) | .aeth'
  rocescope dump --qp 0x4bdaaf --op ack trace.pcap
  rocescope dump -f 'vlan and host 10.0.0.5' trace.pcap`,
		flags: func(fs *pflag.FlagSet) runner {
			all := fs.Bool("all", false, "print every frame, not only RoCE/IB frames and frames that fail to decode")
			port := fs.Uint16("roce-port", 4791, "UDP destination port of RoCEv2")
			var fo filterOptions
			fo.bind(fs)
			fs.String("config", "", "read flag values from this YAML file")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("no capture file given")
				}
				set, err := fo.set(fo.expr)
				if err != nil {
					return err
				}
				out := bufio.NewWriterSize(e.stdout, 1<<16)
				dp := &dumper{out: out, dec: decode.Decoder{RoCEPort: *port}, filter: set, named: len(args) > 1, all: *all}
				for _, path := range args {
					if err := dp.file(ctx, path); err != nil {
						return errors.Join(err, out.Flush())
					}
				}
				if set != nil {
					fmt.Fprintf(e.stderr, "rocescope dump: %d frames, %d filtered (%s)\n", dp.frames, dp.filtered, describeFilter(set))
				}
				return out.Flush()
			}
		},
	}
}

// dumper prints the frames of files.
type dumper struct {
	out      io.Writer
	dec      decode.Decoder
	filter   *filter.Set // nil: every frame
	named    bool        // objects name their file
	all      bool        // every frame, not only RoCE/IB frames and decode errors
	pkt      decode.Packet
	buf      []byte
	frames   uint64 // frames read, over all files
	filtered uint64 // frames the filter removed
}

// file prints the frames of one file.
func (d *dumper) file(ctx context.Context, path string) error {
	src, err := file.Open([]string{path}, nil)
	if err != nil {
		return err
	}
	defer src.Close()
	quoted, _ := json.Marshal(path)
	var frame uint64
	p := &d.pkt
	return capture.Each(ctx, src, capture.NewBatch(256), func(b *capture.Batch) error {
		for i := range b.Frames {
			f := &b.Frames[i]
			frame++
			d.frames++
			if !d.filter.Frame(f.Data, f.Link) {
				d.filtered++
				continue
			}
			derr := d.dec.Decode(p, f.Data, f.Link)
			if derr == nil && !d.filter.Packet(p) {
				d.filtered++
				continue
			}
			if !d.all && !p.IsRoCE() && derr == nil {
				continue
			}
			buf := append(d.buf[:0], `{"frame":`...)
			buf = strconv.AppendUint(buf, frame, 10)
			if d.named {
				buf = append(append(buf, `,"file":`...), quoted...)
			}
			buf = strconv.AppendUint(append(buf, `,"len":`...), uint64(f.OrigLen), 10)
			buf = strconv.AppendUint(append(buf, `,"caplen":`...), uint64(len(f.Data)), 10)
			buf = strconv.AppendInt(append(buf, `,"time_ns":`...), f.Time, 10)
			buf = append(p.AppendJSON(append(buf, ',')), "}\n"...)
			d.buf = buf
			if _, err := d.out.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
}
