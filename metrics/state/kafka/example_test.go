package kafka_test

import (
	"fmt"

	"github.com/rocescope/rocescope/metrics/state/kafka"
)

func ExampleParseURL() {
	t, err := kafka.ParseURL("kafka://k1,k2:9093/states?max-record-bytes=4000000")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.Brokers, t.Topic, t.MaxRecordBytes)
	// Output: [k1:9092 k2:9093] states 4000000
}
