package memwal

import (
	"fmt"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// Op is what a record does to its key.
type Op int8

const (
	// Upsert inserts the row or replaces the row with the same key.
	Upsert Op = iota
	// Delete is a tombstone: the key's row is deleted.
	Delete
)

func (o Op) String() string {
	if o == Delete {
		return "delete"
	}
	return "upsert"
}

// Record is one upsert or tombstone. A tombstone needs only the
// primary-key values; its other values are ignored.
type Record struct {
	Op  Op
	Row table.Row
}

// CheckRecord validates a record against the schema: one value per field,
// each of its field's Go type, and a non-null primary key.
func CheckRecord(s *pb.Schema, r Record) error {
	if r.Op != Upsert && r.Op != Delete {
		return fmt.Errorf("unknown op %d", r.Op)
	}
	if len(r.Row) != len(s.Fields) {
		return fmt.Errorf("row has %d values, schema has %d fields", len(r.Row), len(s.Fields))
	}
	for i, f := range s.Fields {
		key := table.FieldIndexIsKey(s, f.Id)
		if r.Op == Delete && !key {
			continue
		}
		v := r.Row[i]
		if v == nil {
			if key {
				return fmt.Errorf("missing primary-key field %q", f.Name)
			}
			if !f.Nullable {
				return fmt.Errorf("field %q: null not allowed", f.Name)
			}
			continue
		}
		if !goTypeFits(f.Type, v) {
			return fmt.Errorf("field %q: Go value %T does not fit type %s", f.Name, v, table.TypeName(f.Type))
		}
	}
	return nil
}

func goTypeFits(t pb.FieldType, v any) bool {
	switch v.(type) {
	case int64:
		return t == pb.FieldType_FIELD_TYPE_INT64
	case float64:
		return t == pb.FieldType_FIELD_TYPE_FLOAT64
	case string:
		return t == pb.FieldType_FIELD_TYPE_STRING
	case bool:
		return t == pb.FieldType_FIELD_TYPE_BOOL
	case []byte:
		return t == pb.FieldType_FIELD_TYPE_BYTES
	case table.Timestamp:
		return t == pb.FieldType_FIELD_TYPE_TIMESTAMP
	}
	return false
}

// tombstoneRow keeps only the key values: a tombstone's other values carry
// nothing and must not be logged or flushed.
func tombstoneRow(s *pb.Schema, r table.Row) table.Row {
	out := make(table.Row, len(r))
	for _, i := range table.KeyIndexes(s) {
		out[i] = r[i]
	}
	return out
}

// encodeRecord converts a checked record to its WAL form.
func encodeRecord(s *pb.Schema, r Record) *pb.WalRecord {
	wr := &pb.WalRecord{Values: make([]*pb.Value, len(s.Fields))}
	if r.Op == Delete {
		wr.Op = pb.RowOp_ROW_OP_DELETE
	}
	for i := range s.Fields {
		wr.Values[i] = toValue(r.Row[i])
	}
	return wr
}

func toValue(v any) *pb.Value {
	switch x := v.(type) {
	case int64:
		return &pb.Value{Kind: &pb.Value_Int64{Int64: x}}
	case float64:
		return &pb.Value{Kind: &pb.Value_Float64{Float64: x}}
	case string:
		return &pb.Value{Kind: &pb.Value_String_{String_: x}}
	case bool:
		return &pb.Value{Kind: &pb.Value_Bool{Bool: x}}
	case []byte:
		return &pb.Value{Kind: &pb.Value_Bytes{Bytes: x}}
	case table.Timestamp:
		return &pb.Value{Kind: &pb.Value_TimestampMicros{TimestampMicros: int64(x)}}
	}
	return &pb.Value{Kind: &pb.Value_Null{Null: true}}
}

// decodeRecord converts a WAL record back, checking it against the schema:
// a WAL written for another schema is corrupt for this one.
func decodeRecord(s *pb.Schema, wr *pb.WalRecord) (Record, error) {
	var r Record
	switch wr.Op {
	case pb.RowOp_ROW_OP_UPSERT:
		r.Op = Upsert
	case pb.RowOp_ROW_OP_DELETE:
		r.Op = Delete
	default:
		return r, fmt.Errorf("unknown op %v", wr.Op)
	}
	if len(wr.Values) != len(s.Fields) {
		return r, fmt.Errorf("record has %d values, schema has %d fields", len(wr.Values), len(s.Fields))
	}
	r.Row = make(table.Row, len(s.Fields))
	for i, v := range wr.Values {
		r.Row[i] = fromValue(v)
	}
	if err := CheckRecord(s, r); err != nil {
		return r, err
	}
	return r, nil
}

func fromValue(v *pb.Value) any {
	switch k := v.GetKind().(type) {
	case *pb.Value_Int64:
		return k.Int64
	case *pb.Value_Float64:
		return k.Float64
	case *pb.Value_String_:
		return k.String_
	case *pb.Value_Bool:
		return k.Bool
	case *pb.Value_Bytes:
		return k.Bytes
	case *pb.Value_TimestampMicros:
		return table.Timestamp(k.TimestampMicros)
	}
	return nil
}
