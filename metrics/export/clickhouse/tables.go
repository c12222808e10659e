package clickhouse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// setup makes the database and the tables that are missing, checks that
// those that exist are the sink's, and adds the columns they lack (the
// report gained keys since they were made). A table of another schema is
// refused with ErrSchema: the sink does not mix its rows into it.
func (s *Sink) setup() error {
	db := s.t.Database
	if _, err := s.post(fmt.Sprintf("CREATE DATABASE IF NOT EXISTS `%s`", db), nil); err != nil {
		return err
	}
	for i := range tables {
		t := &tables[i]
		info, err := selectRows[struct {
			Engine      string `json:"engine"`
			SortingKey  string `json:"sorting_key"`
			PartitionBy string `json:"partition_key"`
		}](s, "SELECT engine, sorting_key, partition_key FROM system.tables WHERE database = '%s' AND name = '%s'", db, t.name)
		if err != nil {
			return err
		}
		if len(info) == 0 {
			if _, err := s.post(createTable(db, t), nil); err != nil {
				return err
			}
			continue
		}
		if in := info[0]; !strings.HasSuffix(in.Engine, "ReplacingMergeTree") || in.SortingKey != t.orderBy || in.PartitionBy != partitionBy {
			return fmt.Errorf("table %s.%s is %s ordered by (%s), partitioned by %s, not ReplacingMergeTree(written_ns) ordered by (%s) and partitioned by %s: "+
				"an earlier rocescope's, or another program's. Rocescope does not mix its rows into it: write into another database, or "+
				"keep the old rows apart with RENAME TABLE %[1]s.%[2]s TO %[1]s.%[2]s_old: %[8]w",
				db, t.name, in.Engine, in.SortingKey, in.PartitionBy, t.orderBy, partitionBy, ErrSchema)
		}
		cols, err := selectRows[struct{ Name, Type string }](s, "SELECT name, type FROM system.columns WHERE database = '%s' AND table = '%s'", db, t.name)
		if err != nil {
			return err
		}
		have := make(map[string]string, len(cols))
		for _, c := range cols {
			have[c.Name] = c.Type
		}
		for _, c := range t.columns {
			typ, ok := have[c[0]]
			switch {
			case !ok:
				_, err := s.post(fmt.Sprintf("ALTER TABLE `%s`.`%s` ADD COLUMN `%s` %s", db, t.name, c[0], c[1]), nil)
				if se := (*serverError)(nil); err != nil && !(errors.As(err, &se) && se.code == duplicateColumn) {
					return err
				}
			case typ != c[1]:
				return fmt.Errorf("table %s.%s has column %s of type %s, not %s: an earlier rocescope's, or another program's. "+
					"Rocescope does not mix its rows into it: write into another database, or keep the old rows apart with "+
					"RENAME TABLE %[1]s.%[2]s TO %[1]s.%[2]s_old: %[6]w", db, t.name, c[0], typ, c[1], ErrSchema)
			}
		}
	}
	return nil
}

// duplicateColumn is ClickHouse's exception code for adding a column a
// table has: another sink added it first.
const duplicateColumn = 15

// selectRows runs query (formatted with args) and decodes its rows.
func selectRows[T any](s *Sink, query string, args ...any) ([]T, error) {
	q := fmt.Sprintf(query, args...) + " FORMAT JSONEachRow"
	out, err := s.post(q, nil)
	if err != nil {
		return nil, err
	}
	var rows []T
	for d := json.NewDecoder(bytes.NewReader(out)); d.More(); {
		var r T
		if err := d.Decode(&r); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// dropExpired drops the days (partitions) of every table whose rows are
// all older than the TTL at now.
func (s *Sink) dropExpired(now time.Time) error {
	cut, _ := strconv.Atoi(now.Add(-s.t.TTL).UTC().Format("20060102"))
	for _, t := range tables {
		parts, err := selectRows[struct{ Partition string }](s, "SELECT DISTINCT partition FROM system.parts WHERE database = '%s' AND table = '%s' AND active", s.t.Database, t.name)
		if err != nil {
			return err
		}
		for _, p := range parts {
			if day, err := strconv.Atoi(p.Partition); err == nil && day < cut {
				if _, err := s.post(fmt.Sprintf("ALTER TABLE `%s`.`%s` DROP PARTITION %d", s.t.Database, t.name, day), nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
