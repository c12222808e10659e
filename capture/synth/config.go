package synth

import (
	"errors"
	"fmt"
	"time"
)

// Off turns a feature off: a Config field set to Off (any negative value)
// means zero, while the zero value means the field's default.
const Off = -1

// MinSnapLen is the smallest non-zero snap length: the longest header
// stack the generator writes (Ethernet, 802.1Q tag, IPv6, UDP, BTH, RETH and
// ImmDt). Longer snap lengths cut only payload, pad and ICRC, which the
// decoder does not count as an error, so the truth holds for cut frames too.
const MinSnapLen = 14 + 4 + 40 + 8 + 12 + 16 + 4

// MaxFlows is the largest number of connections a Config may ask for.
const MaxFlows = 1 << 20

// Defaults of the Config fields.
const (
	DefaultPackets     = 100_000
	DefaultFlows       = 1000
	DefaultHosts       = 32
	DefaultWindow      = time.Second
	DefaultDuration    = 3 * time.Second
	DefaultZipfS       = 1.1
	DefaultMaxMessage  = 1 << 20
	DefaultDSCP        = 26
	DefaultJitterFlows = 4
	// DefaultStart is the default time of the first frame, 1.7e9 s after
	// the Unix epoch, rounded down to a multiple of the window.
	DefaultStart int64 = 1_700_000_000e9
)

// Config sets what the source generates. The zero value of every field
// means its default (listed with the field); a negative value ([Off])
// means zero for the probabilities, shares and counts that have a non-zero
// default. New never modifies the Config. Probabilities and shares are in
// [0, 1].
type Config struct {
	Seed     uint64        // the trace is a function of the Config, seed included
	Packets  int           // frames in the trace (default 100000)
	Flows    int           // RC connections, each two flows (default 1000, at most MaxFlows)
	Hosts    int           // hosts the connections run between (default 32, at least 2)
	Start    int64         // earliest frame time, ns since the Unix epoch (default DefaultStart aligned to Window)
	Window   time.Duration // window length of the truth (default 1s)
	Duration time.Duration // frames are spread over [Start, Start+Duration) (default 3s)

	ZipfS      float64 // Zipf exponent of connection weights and message sizes (default 1.1)
	MaxMessage int     // typical message size of the heaviest connection, bytes (default 1 MiB, at most 1 GiB)
	PMTU       int     // path MTU of every connection: 256..4096, a power of two; default: 1024 or 4096 at random per connection
	DSCP       int     // DSCP of RoCE packets other than CNPs (default 26; CNPs use 48)

	IPv6Share float64 // connections over IPv6 (default 0.25)
	VLANShare float64 // connections with an 802.1Q tag (default 0.5)
	ReadShare float64 // messages that are RDMA READs (default 0.2)
	SendShare float64 // messages that are SENDs (default 0.3); the rest are RDMA WRITEs

	LossProb         float64 // a new request packet is lost (default 0.0005)
	LossBeforeMirror float64 // a lost packet was lost before the mirror, so it is not in the trace (default 0.25)
	RNRProb          float64 // a SEND First or Only meets no receive buffer: RNR NAK (default 0.005)
	ECNCEProb        float64 // a request packet or READ response is marked CE (default 0.01)
	CNPProb          float64 // a CE-marked packet makes the receiver send a CNP, if none is pending (default 1)
	PFCShare         float64 // frames that are PFC pause frames (default 0.001)
	OtherShare       float64 // frames that are ARP, UDP or TCP background (default 0.02)
	JitterFlows      int     // connections whose rate swings between adjacent windows (default min(4, Flows-1))
	JitterShare      float64 // frames of each jitter connection's requests in its busy windows; a tenth in the others (default 0.05)

	// ERSPAN wraps every frame as a switch's mirror session sends it to a
	// collector: 0 for none, 2 for ERSPAN type II, 3 for type III (GRE
	// with sequence numbers, outer IPv4).
	ERSPAN int

	SnapLen int // captured bytes per frame, 0 for whole frames, else at least MinSnapLen (plus the ERSPAN headers)

	// Scenario injects troubles and healthy look-alikes, each once, on
	// top of the Packets frames (see [Scenario]); 0 for none.
	Scenario Scenario
}

// ErrConfig is wrapped by every error New returns for an invalid Config.
var ErrConfig = errors.New("invalid config")

// settings is a Config with the defaults applied and the probabilities
// converted.
type settings struct {
	Config
	imm                   prob // SEND/WRITE messages with immediate data
	ipv6, vlan            prob
	read, readOrSend      prob // message kinds, cumulative
	loss, lossBefore, rnr prob
	ce, cnp               prob
	other                 prob // OtherShare among all frames
	pfcAfterOther         prob // PFCShare among the frames that are not background
}

// orDefault returns v, or def when v is zero, or zero when v is negative.
func orDefault[T int | int64 | float64 | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// resolve applies the defaults to c and checks the result.
func resolve(c *Config) (*settings, error) {
	var s settings
	if c != nil {
		s.Config = *c
	}
	k := &s.Config
	k.Packets = orDefault(k.Packets, DefaultPackets)
	k.Flows = orDefault(k.Flows, DefaultFlows)
	k.Hosts = orDefault(k.Hosts, DefaultHosts)
	k.Window = orDefault(k.Window, DefaultWindow)
	k.Duration = orDefault(k.Duration, DefaultDuration)
	if k.Start == 0 && k.Window > 0 {
		k.Start = DefaultStart - DefaultStart%int64(k.Window)
	}
	k.ZipfS = orDefault(k.ZipfS, DefaultZipfS)
	k.MaxMessage = orDefault(k.MaxMessage, DefaultMaxMessage)
	k.DSCP = orDefault(k.DSCP, DefaultDSCP)
	k.IPv6Share = orDefault(k.IPv6Share, 0.25)
	k.VLANShare = orDefault(k.VLANShare, 0.5)
	k.ReadShare = orDefault(k.ReadShare, 0.2)
	k.SendShare = orDefault(k.SendShare, 0.3)
	k.LossProb = orDefault(k.LossProb, 0.0005)
	k.LossBeforeMirror = orDefault(k.LossBeforeMirror, 0.25)
	k.RNRProb = orDefault(k.RNRProb, 0.005)
	k.ECNCEProb = orDefault(k.ECNCEProb, 0.01)
	k.CNPProb = orDefault(k.CNPProb, 1)
	k.PFCShare = orDefault(k.PFCShare, 0.001)
	k.OtherShare = orDefault(k.OtherShare, 0.02)
	k.JitterFlows = orDefault(k.JitterFlows, min(DefaultJitterFlows, k.Flows-1))
	k.JitterShare = orDefault(k.JitterShare, 0.05)
	k.SnapLen = max(k.SnapLen, 0)
	k.ERSPAN = max(k.ERSPAN, 0)

	bad := func(format string, a ...any) (*settings, error) {
		return nil, fmt.Errorf("synth: "+format+": %w", append(a, ErrConfig)...)
	}
	switch {
	case k.Flows < 1 || k.Flows > MaxFlows:
		return bad("flows %d not in [1, %d]", k.Flows, MaxFlows)
	case k.Hosts < 2 || k.Hosts > 1<<16:
		return bad("hosts %d not in [2, 65536]", k.Hosts)
	case k.Start < 0:
		return bad("start %d before the Unix epoch", k.Start)
	case k.Window <= 0 || k.Duration <= 0:
		return bad("window %v and duration %v must be positive", k.Window, k.Duration)
	case k.Start > 1<<62 || int64(k.Duration) > 1<<62:
		return bad("start %d or duration %v too far in the future", k.Start, k.Duration)
	case k.ZipfS <= 0 || k.ZipfS > 10:
		return bad("zipf exponent %v not in (0, 10]", k.ZipfS)
	case k.MaxMessage < 1 || k.MaxMessage > 1<<30:
		return bad("max message %d not in [1, 2^30]", k.MaxMessage)
	case k.PMTU != 0 && (k.PMTU < 256 || k.PMTU > 4096 || k.PMTU&(k.PMTU-1) != 0):
		return bad("pmtu %d is not 256, 512, 1024, 2048 or 4096", k.PMTU)
	case k.DSCP > 63:
		return bad("dscp %d above 63", k.DSCP)
	case k.JitterFlows >= k.Flows:
		return bad("%d jitter flows need more than %d flows", k.JitterFlows, k.Flows)
	case float64(k.JitterFlows)*k.JitterShare > 0.9:
		return bad("jitter flows take %v of the frames, more than 0.9", float64(k.JitterFlows)*k.JitterShare)
	case k.ERSPAN != 0 && k.ERSPAN != 2 && k.ERSPAN != 3:
		return bad("erspan type %d is not 0, 2 or 3", k.ERSPAN)
	case k.SnapLen > 0 && k.SnapLen < MinSnapLen+erspanLen(k.ERSPAN):
		return bad("snap length %d below %d", k.SnapLen, MinSnapLen+erspanLen(k.ERSPAN))
	case k.ReadShare+k.SendShare > 1:
		return bad("read share %v and send share %v add up to more than 1", k.ReadShare, k.SendShare)
	case k.OtherShare+k.PFCShare >= 1:
		return bad("background share %v and PFC share %v leave no RoCE frames", k.OtherShare, k.PFCShare)
	case k.Scenario >= scenarioEnd:
		return bad("scenario %#x", uint16(k.Scenario))
	}
	for _, p := range [...]struct {
		name string
		v    float64
	}{
		{"ipv6 share", k.IPv6Share}, {"vlan share", k.VLANShare}, {"read share", k.ReadShare},
		{"send share", k.SendShare}, {"loss probability", k.LossProb}, {"loss before mirror", k.LossBeforeMirror},
		{"rnr probability", k.RNRProb}, {"ecn-ce probability", k.ECNCEProb}, {"cnp probability", k.CNPProb},
		{"pfc share", k.PFCShare}, {"other share", k.OtherShare}, {"jitter share", k.JitterShare},
	} {
		if !(p.v >= 0 && p.v <= 1) { // also rejects NaN
			return bad("%s %v not in [0, 1]", p.name, p.v)
		}
	}
	s.imm = probOf(0.25)
	s.ipv6, s.vlan = probOf(k.IPv6Share), probOf(k.VLANShare)
	s.read, s.readOrSend = probOf(k.ReadShare), probOf(k.ReadShare+k.SendShare)
	s.loss, s.lossBefore, s.rnr = probOf(k.LossProb), probOf(k.LossBeforeMirror), probOf(k.RNRProb)
	s.ce, s.cnp = probOf(k.ECNCEProb), probOf(k.CNPProb)
	s.other = probOf(k.OtherShare)
	s.pfcAfterOther = probOf(k.PFCShare / (1 - k.OtherShare))
	return &s, nil
}
