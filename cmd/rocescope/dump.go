package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
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
files each object also has "file".`,
		example: `  rocescope dump trace.pcap | head
  rocescope dump --all trace.pcap          # also non-RoCE frames (PFC, ARP, ...)
  rocescope dump trace.pcap | jq 'select(.bth.opcode == 17) | .aeth'`,
		flags: func(fs *pflag.FlagSet) runner {
			all := fs.Bool("all", false, "print every frame, not only RoCE/IB frames and frames that fail to decode")
			port := fs.Uint16("roce-port", 4791, "UDP destination port of RoCEv2")
			fs.String("config", "", "read flag values from this YAML file")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("no capture file given")
				}
				out := bufio.NewWriterSize(e.stdout, 1<<16)
				d := &decode.Decoder{RoCEPort: *port}
				for _, path := range args {
					if err := dumpFile(ctx, out, d, path, len(args) > 1, *all); err != nil {
						return errors.Join(err, out.Flush())
					}
				}
				return out.Flush()
			}
		},
	}
}

// dumpFile prints the frames of one file.
func dumpFile(ctx context.Context, out io.Writer, d *decode.Decoder, path string, named, all bool) error {
	src, err := file.Open([]string{path}, nil)
	if err != nil {
		return err
	}
	defer src.Close()
	quoted, _ := json.Marshal(path)
	var (
		p     decode.Packet
		buf   []byte
		frame uint64
	)
	return capture.Each(ctx, src, capture.NewBatch(256), func(b *capture.Batch) error {
		for i := range b.Frames {
			f := &b.Frames[i]
			frame++
			derr := d.Decode(&p, f.Data, f.Link)
			if !all && !p.IsRoCE() && derr == nil {
				continue
			}
			buf = append(buf[:0], `{"frame":`...)
			buf = strconv.AppendUint(buf, frame, 10)
			if named {
				buf = append(append(buf, `,"file":`...), quoted...)
			}
			buf = strconv.AppendUint(append(buf, `,"len":`...), uint64(f.OrigLen), 10)
			buf = strconv.AppendUint(append(buf, `,"caplen":`...), uint64(len(f.Data)), 10)
			buf = strconv.AppendInt(append(buf, `,"time_ns":`...), f.Time, 10)
			buf = append(p.AppendJSON(append(buf, ',')), "}\n"...)
			if _, err := out.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
}
