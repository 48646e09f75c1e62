package index

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// EncodeKey encodes a non-null value of field type t so that bytes.Compare
// on encodings orders like the values. An index covers one column of one
// type, so the encoding needs no type tag, and strings and bytes are stored
// as they are. table.AppendKey is not used: it has no float64 encoding
// (float64 cannot be a primary key, but it can be indexed).
func EncodeKey(t pb.FieldType, v any) ([]byte, error) {
	switch t {
	case pb.FieldType_FIELD_TYPE_INT64:
		x, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("int64 key: got %T", v)
		}
		return binary.BigEndian.AppendUint64(nil, uint64(x)^(1<<63)), nil
	case pb.FieldType_FIELD_TYPE_TIMESTAMP:
		x, ok := v.(table.Timestamp)
		if !ok {
			return nil, fmt.Errorf("timestamp key: got %T", v)
		}
		return binary.BigEndian.AppendUint64(nil, uint64(x)^(1<<63)), nil
	case pb.FieldType_FIELD_TYPE_FLOAT64:
		x, ok := v.(float64)
		if !ok {
			return nil, fmt.Errorf("float64 key: got %T", v)
		}
		if x == 0 {
			x = 0 // -0 and +0 are one key
		}
		u := math.Float64bits(x)
		if u&(1<<63) != 0 {
			u = ^u
		} else {
			u |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(nil, u), nil
	case pb.FieldType_FIELD_TYPE_STRING:
		x, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("string key: got %T", v)
		}
		return []byte(x), nil
	case pb.FieldType_FIELD_TYPE_BYTES:
		x, ok := v.([]byte)
		if !ok {
			return nil, fmt.Errorf("bytes key: got %T", v)
		}
		return append([]byte{}, x...), nil
	case pb.FieldType_FIELD_TYPE_BOOL:
		x, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("bool key: got %T", v)
		}
		if x {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	}
	return nil, fmt.Errorf("field type %v cannot be indexed", t)
}

// ParseKey parses a key given on the command line as a value of field f:
// integers and floats in decimal, timestamps as integer microseconds or RFC
// 3339, booleans as true/false, bytes as base64, strings as they are.
func ParseKey(f *pb.Field, s string) ([]byte, error) {
	var v any
	bad := func(want string) error {
		return fmt.Errorf("key %q is not %s (column %q is %s)", s, want, f.Name, table.TypeName(f.Type))
	}
	switch f.Type {
	case pb.FieldType_FIELD_TYPE_INT64:
		x, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, bad("an integer")
		}
		v = x
	case pb.FieldType_FIELD_TYPE_FLOAT64:
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(x) {
			return nil, bad("a number")
		}
		v = x
	case pb.FieldType_FIELD_TYPE_TIMESTAMP:
		if x, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
			v = table.Timestamp(x)
		} else if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s)); err == nil {
			v = table.Timestamp(t.UnixMicro())
		} else {
			return nil, bad("a timestamp (integer microseconds or RFC 3339)")
		}
	case pb.FieldType_FIELD_TYPE_BOOL:
		x, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, bad("a boolean")
		}
		v = x
	case pb.FieldType_FIELD_TYPE_BYTES:
		x, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, bad("base64")
		}
		v = x
	case pb.FieldType_FIELD_TYPE_STRING:
		v = s
	default:
		return nil, fmt.Errorf("column %q of type %s cannot be indexed", f.Name, table.TypeName(f.Type))
	}
	return EncodeKey(f.Type, v)
}

// DecodeKey is the inverse of EncodeKey, for printing.
func DecodeKey(t pb.FieldType, k []byte) (any, error) {
	fixed := func() (uint64, error) {
		if len(k) != 8 {
			return 0, fmt.Errorf("%w: %d-byte key for a %s column", ErrCorrupt, len(k), table.TypeName(t))
		}
		return binary.BigEndian.Uint64(k), nil
	}
	switch t {
	case pb.FieldType_FIELD_TYPE_INT64, pb.FieldType_FIELD_TYPE_TIMESTAMP:
		u, err := fixed()
		if err != nil {
			return nil, err
		}
		if t == pb.FieldType_FIELD_TYPE_TIMESTAMP {
			return table.Timestamp(int64(u ^ (1 << 63))), nil
		}
		return int64(u ^ (1 << 63)), nil
	case pb.FieldType_FIELD_TYPE_FLOAT64:
		u, err := fixed()
		if err != nil {
			return nil, err
		}
		if u&(1<<63) != 0 {
			u &^= 1 << 63
		} else {
			u = ^u
		}
		return math.Float64frombits(u), nil
	case pb.FieldType_FIELD_TYPE_STRING:
		return string(k), nil
	case pb.FieldType_FIELD_TYPE_BYTES:
		return append([]byte{}, k...), nil
	case pb.FieldType_FIELD_TYPE_BOOL:
		if len(k) != 1 || k[0] > 1 {
			return nil, fmt.Errorf("%w: bad bool key", ErrCorrupt)
		}
		return k[0] == 1, nil
	}
	return nil, fmt.Errorf("field type %v cannot be indexed", t)
}

// keyJSON renders a key for messages and plans.
func keyJSON(t pb.FieldType, k []byte) string {
	v, err := DecodeKey(t, k)
	if err != nil {
		return fmt.Sprintf("%x", k)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
