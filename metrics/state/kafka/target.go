package kafka

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Scheme is the URL scheme of a Kafka target: kafka://BROKER[,BROKER...]/TOPIC.
const Scheme = "kafka://"

// DefaultMaxRecordBytes is the largest record a Producer writes when it
// cannot learn the topic's max.message.bytes: a little under the 1 MiB a
// broker accepts by default (message.max.bytes 1048588), leaving room for
// the key, headers and batch framing.
const DefaultMaxRecordBytes = 1_000_000

// minRecordBytes bounds max-record-bytes from below: a part needs room for
// the state's fixed fields and at least one flow.
const minRecordBytes = 4096

// ErrTarget is wrapped by errors parsing a Kafka URL.
var ErrTarget = errors.New("invalid kafka target")

// Target is where states go or come from: the seed brokers, the topic, the
// largest record the brokers accept and how long a producer tries to
// deliver a state.
type Target struct {
	Brokers         []string // host:port each
	Topic           string
	MaxRecordBytes  int           // largest state record, split above; 0: learn it from the topic
	DeliveryTimeout time.Duration // 0: the ProducerConfig's
}

// IsURL reports whether s names a Kafka target rather than a path.
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme) }

// ParseURL reads
// kafka://BROKER[,BROKER...]/TOPIC[?max-record-bytes=N&delivery-timeout=D].
// A broker without a port gets Kafka's 9092.
func ParseURL(s string) (*Target, error) {
	if !IsURL(s) {
		return nil, fmt.Errorf("kafka: %q does not start with %s: %w", s, Scheme, ErrTarget)
	}
	hosts, rest, _ := strings.Cut(strings.TrimPrefix(s, Scheme), "/")
	path, rawQuery, _ := strings.Cut(rest, "?")
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("kafka: %q: %w: %w", s, err, ErrTarget)
	}
	t := &Target{Topic: path}
	if t.Topic == "" || strings.Contains(t.Topic, "/") {
		return nil, fmt.Errorf("kafka: %q: want one topic after the brokers: %w", s, ErrTarget)
	}
	for b := range strings.SplitSeq(hosts, ",") {
		if b == "" {
			return nil, fmt.Errorf("kafka: %q: empty broker address: %w", s, ErrTarget)
		}
		if _, _, err := net.SplitHostPort(b); err != nil {
			b = net.JoinHostPort(b, "9092")
		}
		t.Brokers = append(t.Brokers, b)
	}
	for k, v := range query {
		switch v := v[len(v)-1]; k {
		case "max-record-bytes":
			n, err := strconv.Atoi(v)
			if err != nil || n < minRecordBytes {
				return nil, fmt.Errorf("kafka: %q: max-record-bytes %q: want a number of at least %d: %w", s, v, minRecordBytes, ErrTarget)
			}
			t.MaxRecordBytes = n
		case "delivery-timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second {
				return nil, fmt.Errorf("kafka: %q: delivery-timeout %q: want a duration of at least 1s: %w", s, v, ErrTarget)
			}
			t.DeliveryTimeout = d
		default:
			return nil, fmt.Errorf("kafka: %q: unknown parameter %q (known: max-record-bytes, delivery-timeout): %w", s, k, ErrTarget)
		}
	}
	return t, nil
}
