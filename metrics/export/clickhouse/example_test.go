package clickhouse_test

import (
	"fmt"

	"github.com/rocescope/rocescope/metrics/export/clickhouse"
)

func ExampleParseURL() {
	t, err := clickhouse.ParseURL("clickhouse://ch1/rocescope?spill=/var/spool/rocescope/ch")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.Addr, t.Database, t.Spill)
	// Output: ch1:8123 rocescope /var/spool/rocescope/ch
}
