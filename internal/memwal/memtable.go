package memwal

import (
	"slices"
	"strings"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// MemTable holds the latest record per primary key, with the range of WAL
// positions applied to it. The last write per key wins, so a flushed
// SSTable holds exactly one record per key.
type MemTable struct {
	schema *pb.Schema
	rows   map[string]Record
	bytes  int
	// first and last are the WAL positions applied (inclusive); first is 0
	// when nothing has been applied.
	first, last uint64
}

// NewMemTable returns an empty MemTable.
func NewMemTable(s *pb.Schema) *MemTable {
	return &MemTable{schema: s, rows: map[string]Record{}}
}

// Apply applies the records of the WAL entry at position. Entries must be
// applied in position order.
// REQUIRES: every record passed CheckRecord.
func (m *MemTable) Apply(position uint64, recs []Record) {
	if m.first == 0 {
		m.first = position
	}
	m.last = position
	for _, r := range recs {
		if r.Op == Delete {
			r.Row = tombstoneRow(m.schema, r.Row)
		}
		k := table.KeyOf(m.schema, r.Row)
		if old, ok := m.rows[k]; ok {
			m.bytes -= rowSize(old.Row)
		} else {
			m.bytes += len(k)
		}
		m.rows[k] = r
		m.bytes += rowSize(r.Row)
	}
}

// Len is the number of keys held.
func (m *MemTable) Len() int { return len(m.rows) }

// Bytes approximates the memory the rows hold.
func (m *MemTable) Bytes() int { return m.bytes }

// Positions returns the WAL range applied; first is 0 when empty.
func (m *MemTable) Positions() (first, last uint64) { return m.first, m.last }

// Get returns the record for a key (table.KeyOf encoding).
func (m *MemTable) Get(key string) (Record, bool) {
	r, ok := m.rows[key]
	return r, ok
}

// Sorted returns the keys in ascending order with their records.
func (m *MemTable) Sorted() ([]string, []Record) {
	keys := make([]string, 0, len(m.rows))
	for k := range m.rows {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	recs := make([]Record, len(keys))
	for i, k := range keys {
		recs[i] = m.rows[k]
	}
	return keys, recs
}

func rowSize(r table.Row) int {
	n := 16 * len(r)
	for _, v := range r {
		switch x := v.(type) {
		case string:
			n += len(x)
		case []byte:
			n += len(x)
		}
	}
	return n
}
