package table

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// Timestamp is microseconds since the Unix epoch, UTC.
type Timestamp int64

// Row holds one value per schema field, in schema order. A value is nil,
// int64, float64, string, bool, []byte or Timestamp.
type Row []any

var typeNames = map[string]pb.FieldType{
	"int64":     pb.FieldType_FIELD_TYPE_INT64,
	"float64":   pb.FieldType_FIELD_TYPE_FLOAT64,
	"string":    pb.FieldType_FIELD_TYPE_STRING,
	"bool":      pb.FieldType_FIELD_TYPE_BOOL,
	"bytes":     pb.FieldType_FIELD_TYPE_BYTES,
	"timestamp": pb.FieldType_FIELD_TYPE_TIMESTAMP,
}

// TypeName is the schema-string name of a field type.
func TypeName(t pb.FieldType) string {
	for n, v := range typeNames {
		if v == t {
			return n
		}
	}
	return t.String()
}

// ParseSchema parses "id:int64,cat:string" with the named primary key.
func ParseSchema(spec string, primaryKey []string) (*pb.Schema, error) {
	s := &pb.Schema{}
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("empty schema: want name:type[,name:type...]")
	}
	for i, part := range strings.Split(spec, ",") {
		name, typ, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("schema field %q: want name:type", part)
		}
		ft, ok := typeNames[strings.ToLower(strings.TrimSpace(typ))]
		if !ok {
			return nil, fmt.Errorf("schema field %q: unknown type %q (want int64, float64, string, bool, bytes or timestamp)", name, typ)
		}
		s.Fields = append(s.Fields, &pb.Field{Id: int32(i), Name: strings.TrimSpace(name), Type: ft, Nullable: true})
	}
	for _, k := range primaryKey {
		f := FieldByName(s, strings.TrimSpace(k))
		if f == nil {
			return nil, fmt.Errorf("primary key %q is not a field of the schema", k)
		}
		if f.Type == pb.FieldType_FIELD_TYPE_FLOAT64 {
			return nil, fmt.Errorf("primary key %q: float64 cannot be a key", k)
		}
		f.Nullable = false
		s.PrimaryKey = append(s.PrimaryKey, f.Id)
	}
	return s, ValidateSchema(s)
}

// ValidateSchema checks names, ids and the primary key.
func ValidateSchema(s *pb.Schema) error {
	if s == nil || len(s.Fields) == 0 {
		return fmt.Errorf("schema has no fields")
	}
	names, ids := map[string]bool{}, map[int32]bool{}
	for _, f := range s.Fields {
		if f.Name == "" || strings.HasPrefix(f.Name, "_") {
			return fmt.Errorf("field name %q: must be non-empty and not start with '_'", f.Name)
		}
		if names[f.Name] || ids[f.Id] {
			return fmt.Errorf("duplicate field %q", f.Name)
		}
		if _, ok := typeNames[TypeName(f.Type)]; !ok {
			return fmt.Errorf("field %q: unsupported type %v", f.Name, f.Type)
		}
		names[f.Name], ids[f.Id] = true, true
	}
	if len(s.PrimaryKey) == 0 {
		return fmt.Errorf("schema has no primary key")
	}
	for _, id := range s.PrimaryKey {
		if !ids[id] {
			return fmt.Errorf("primary key field id %d not in schema", id)
		}
	}
	return nil
}

// FieldByName returns the field or nil.
func FieldByName(s *pb.Schema, name string) *pb.Field {
	for _, f := range s.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// FieldIndex returns the position of field id in the schema, or -1.
func FieldIndex(s *pb.Schema, id int32) int {
	for i, f := range s.Fields {
		if f.Id == id {
			return i
		}
	}
	return -1
}

// KeyIndexes returns the schema positions of the primary-key fields.
func KeyIndexes(s *pb.Schema) []int {
	out := make([]int, len(s.PrimaryKey))
	for i, id := range s.PrimaryKey {
		out[i] = FieldIndex(s, id)
	}
	return out
}

// KeyOf encodes the primary key of r as an order-preserving byte string, so
// keys compare with bytes.Compare and can live in maps and SSTable bounds.
func KeyOf(s *pb.Schema, r Row) string {
	var b []byte
	for _, i := range KeyIndexes(s) {
		b = AppendKey(b, r[i])
	}
	return string(b)
}

// AppendKey appends the order-preserving encoding of one key value.
func AppendKey(b []byte, v any) []byte {
	switch x := v.(type) {
	case int64:
		u := uint64(x) ^ (1 << 63)
		return append(b, 1, byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32), byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
	case Timestamp:
		return AppendKey(b, int64(x))
	case bool:
		if x {
			return append(b, 2, 1)
		}
		return append(b, 2, 0)
	case string:
		return appendEscaped(append(b, 3), []byte(x))
	case []byte:
		return appendEscaped(append(b, 4), x)
	default:
		return append(b, 0)
	}
}

// appendEscaped writes bytes with 0x00 escaped as 0x00 0xFF and a 0x00 0x00
// terminator, keeping the encoding order-preserving for composite keys.
func appendEscaped(b, s []byte) []byte {
	for _, c := range s {
		if c == 0 {
			b = append(b, 0, 0xFF)
		} else {
			b = append(b, c)
		}
	}
	return append(b, 0, 0)
}

// CompareValues orders two values of one field type; nil sorts first.
func CompareValues(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	switch x := a.(type) {
	case int64:
		return cmp3(x, b.(int64))
	case Timestamp:
		return cmp3(x, b.(Timestamp))
	case float64:
		return cmp3(x, b.(float64))
	case string:
		return strings.Compare(x, b.(string))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case []byte:
		return bytes.Compare(x, b.([]byte))
	}
	return 0
}

func cmp3[T int64 | float64 | Timestamp](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ParseValue converts a JSON-decoded value (json.Number for numbers) to the
// Go type of field f.
func ParseValue(f *pb.Field, v any) (any, error) {
	if v == nil {
		if !f.Nullable {
			return nil, fmt.Errorf("field %q: null not allowed", f.Name)
		}
		return nil, nil
	}
	bad := func() (any, error) {
		return nil, fmt.Errorf("field %q: %s value %s does not fit type %s", f.Name, jsonKind(v), short(v), TypeName(f.Type))
	}
	switch f.Type {
	case pb.FieldType_FIELD_TYPE_INT64:
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		i, err := n.Int64()
		if err != nil {
			return bad()
		}
		return i, nil
	case pb.FieldType_FIELD_TYPE_FLOAT64:
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		x, err := n.Float64()
		if err != nil || math.IsInf(x, 0) {
			return bad()
		}
		return x, nil
	case pb.FieldType_FIELD_TYPE_STRING:
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		return s, nil
	case pb.FieldType_FIELD_TYPE_BOOL:
		b, ok := v.(bool)
		if !ok {
			return bad()
		}
		return b, nil
	case pb.FieldType_FIELD_TYPE_BYTES:
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("field %q: bytes must be base64: %v", f.Name, err)
		}
		return b, nil
	case pb.FieldType_FIELD_TYPE_TIMESTAMP:
		switch x := v.(type) {
		case json.Number:
			i, err := x.Int64()
			if err != nil {
				return bad()
			}
			return Timestamp(i), nil
		case string:
			t, err := time.Parse(time.RFC3339Nano, x)
			if err != nil {
				return nil, fmt.Errorf("field %q: timestamp must be RFC 3339 or integer microseconds: %q", f.Name, x)
			}
			return Timestamp(t.UnixMicro()), nil
		}
		return bad()
	}
	return bad()
}

func jsonKind(v any) string {
	switch v.(type) {
	case json.Number:
		return "number"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "value"
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		b = append(b[:37], "..."...)
	}
	return string(b)
}

// ParseJSONRow decodes one JSON object into a row. Unknown fields are an
// error; missing nullable fields are null; the primary key is required.
// It also returns the value of "_op" when present ("upsert" or "delete").
func ParseJSONRow(s *pb.Schema, line []byte) (Row, string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, "", fmt.Errorf("not a JSON object: %v", err)
	}
	if dec.More() {
		return nil, "", fmt.Errorf("trailing data after the JSON object")
	}
	if obj == nil {
		return nil, "", fmt.Errorf("not a JSON object: null")
	}
	op := ""
	if raw, ok := obj["_op"]; ok {
		o, ok := raw.(string)
		if !ok || (o != "upsert" && o != "delete") {
			return nil, "", fmt.Errorf(`"_op" must be "upsert" or "delete"`)
		}
		op = o
		delete(obj, "_op")
	}
	row := make(Row, len(s.Fields))
	for i, f := range s.Fields {
		v, present := obj[f.Name]
		delete(obj, f.Name)
		if !present {
			if !f.Nullable {
				return nil, "", fmt.Errorf("missing primary-key field %q", f.Name)
			}
			continue
		}
		if op == "delete" && !FieldIndexIsKey(s, f.Id) {
			continue
		}
		pv, err := ParseValue(f, v)
		if err != nil {
			return nil, "", err
		}
		row[i] = pv
	}
	if len(obj) > 0 {
		names := make([]string, 0, len(obj))
		for k := range obj {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, "", fmt.Errorf("unknown field %q (schema has %s)", names[0], fieldNames(s))
	}
	return row, op, nil
}

// FieldIndexIsKey reports whether field id is part of the primary key.
func FieldIndexIsKey(s *pb.Schema, id int32) bool {
	for _, k := range s.PrimaryKey {
		if k == id {
			return true
		}
	}
	return false
}

func fieldNames(s *pb.Schema) string {
	n := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		n[i] = f.Name
	}
	return strings.Join(n, ", ")
}

// RowJSON renders a row as a JSON object in schema order.
func RowJSON(s *pb.Schema, r Row, extra ...string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Name)
		b.Write(k)
		b.WriteByte(':')
		var v any = r[i]
		switch x := v.(type) {
		case Timestamp:
			// RFC 3339 has four-digit years only; a timestamp outside them
			// prints as integer microseconds, which ParseValue reads back.
			if t := time.UnixMicro(int64(x)).UTC(); t.Year() >= 0 && t.Year() <= 9999 {
				v = t.Format(time.RFC3339Nano)
			} else {
				v = int64(x)
			}
		case float64:
			if math.IsNaN(x) {
				v = "NaN"
			}
		}
		j, _ := json.Marshal(v)
		b.Write(j)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		k, _ := json.Marshal(extra[i])
		b.WriteByte(',')
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(extra[i+1])
	}
	b.WriteByte('}')
	return b.Bytes()
}
