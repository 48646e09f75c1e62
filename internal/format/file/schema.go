package file

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/compactord/compactord/gen/lancepb"
)

// Kind is the logical type of a field, Arrow's type system as Lance uses it.
type Kind uint8

// The kinds this package decodes.
const (
	KindNull Kind = iota
	KindBool
	KindInt8
	KindInt16
	KindInt32
	KindInt64
	KindUint8
	KindUint16
	KindUint32
	KindUint64
	KindFloat16
	KindFloat32
	KindFloat64
	KindUtf8
	KindLargeUtf8
	KindBinary
	KindLargeBinary
	KindFixedSizeBinary
	KindDate32
	KindDate64
	KindTime32
	KindTime64
	KindDuration
	KindTimestamp
	KindDecimal128
	KindDecimal256
	KindFixedSizeList
	KindList
	KindLargeList
	KindStruct
)

var kindNames = [...]string{"null", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
	"float16", "float32", "float64", "utf8", "large_utf8", "binary", "large_binary", "fixed_size_binary", "date32",
	"date64", "time32", "time64", "duration", "timestamp", "decimal128", "decimal256", "fixed_size_list", "list",
	"large_list", "struct"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// DataType is a logical type with its parameters.
type DataType struct {
	Kind Kind
	// Unit is "s", "ms", "us" or "ns" for times, durations and timestamps.
	Unit string
	// TZ is the timestamp's time zone; empty means none.
	TZ string
	// Precision and Scale of decimals.
	Precision, Scale int
	// Size is the byte width of a fixed-size binary or the list size of a
	// fixed-size list.
	Size int
	// DictIndex is, for an Arrow dictionary-typed field (logical type
	// dict:VALUE:INDEX:false), the index type; Kind is then the value type.
	// Lance stores such a column as its values (decoded arrays hold them
	// flat), so only the schema remembers the dictionary. KindNull (the zero
	// value) means not a dictionary.
	DictIndex Kind
	// DictOrdered is the dictionary's ordered flag.
	DictOrdered bool
}

// ByteWidth is the width of one value of a fixed-width type in bytes, 0
// for bool (a bit) and for types that are not fixed width.
func (t DataType) ByteWidth() int {
	switch t.Kind {
	case KindInt8, KindUint8:
		return 1
	case KindInt16, KindUint16, KindFloat16:
		return 2
	case KindInt32, KindUint32, KindFloat32, KindDate32, KindTime32:
		return 4
	case KindInt64, KindUint64, KindFloat64, KindDate64, KindTime64, KindDuration, KindTimestamp:
		return 8
	case KindDecimal128:
		return 16
	case KindDecimal256:
		return 32
	case KindFixedSizeBinary:
		return t.Size
	}
	return 0
}

// IsVariable reports whether values have offsets (strings and binaries).
func (t DataType) IsVariable() bool {
	switch t.Kind {
	case KindUtf8, KindLargeUtf8, KindBinary, KindLargeBinary:
		return true
	}
	return false
}

func (t DataType) String() string {
	if t.DictIndex != KindNull {
		v := t
		v.DictIndex, v.DictOrdered = KindNull, false
		return fmt.Sprintf("dictionary<%s,%s>", v, t.DictIndex)
	}
	switch t.Kind {
	case KindTimestamp:
		return fmt.Sprintf("timestamp[%s,%s]", t.Unit, t.TZ)
	case KindDecimal128, KindDecimal256:
		return fmt.Sprintf("%s(%d,%d)", t.Kind, t.Precision, t.Scale)
	case KindFixedSizeBinary, KindFixedSizeList:
		return fmt.Sprintf("%s[%d]", t.Kind, t.Size)
	}
	return t.Kind.String()
}

// Field is a node of the file's schema.
type Field struct {
	Name     string
	ID       int32
	Type     DataType
	Nullable bool
	Metadata map[string]string
	Children []*Field
	// Column is the index of the column holding this node's data: a leaf's
	// values (every version), or, in 2.0 files only, a struct's or list's
	// own column. -1 when the node has no column.
	Column int
}

// Schema is the file's schema as a tree.
type Schema struct {
	Fields  []*Field
	version Version
}

// Field returns the top-level field of that name, or nil.
func (s *Schema) Field(name string) *Field {
	for _, f := range s.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

var primitiveTypes = map[string]DataType{
	"null": {Kind: KindNull}, "bool": {Kind: KindBool},
	"int8": {Kind: KindInt8}, "int16": {Kind: KindInt16}, "int32": {Kind: KindInt32}, "int64": {Kind: KindInt64},
	"uint8": {Kind: KindUint8}, "uint16": {Kind: KindUint16}, "uint32": {Kind: KindUint32}, "uint64": {Kind: KindUint64},
	"halffloat": {Kind: KindFloat16}, "float": {Kind: KindFloat32}, "double": {Kind: KindFloat64},
	"string": {Kind: KindUtf8}, "large_string": {Kind: KindLargeUtf8},
	"binary": {Kind: KindBinary}, "large_binary": {Kind: KindLargeBinary}, "json": {Kind: KindLargeBinary},
	"date32:day": {Kind: KindDate32}, "date64:ms": {Kind: KindDate64},
	"time32:s": {Kind: KindTime32, Unit: "s"}, "time32:ms": {Kind: KindTime32, Unit: "ms"},
	"time64:us": {Kind: KindTime64, Unit: "us"}, "time64:ns": {Kind: KindTime64, Unit: "ns"},
	"duration:s": {Kind: KindDuration, Unit: "s"}, "duration:ms": {Kind: KindDuration, Unit: "ms"},
	"duration:us": {Kind: KindDuration, Unit: "us"}, "duration:ns": {Kind: KindDuration, Unit: "ns"},
	"struct": {Kind: KindStruct}, "list": {Kind: KindList}, "list.struct": {Kind: KindList},
	"large_list": {Kind: KindLargeList}, "large_list.struct": {Kind: KindLargeList},
}

// ParseType reads a manifest field's logical_type as a DataType (for a
// fixed-size list of a primitive, the list type; its item type is in the
// field's child).
func ParseType(logicalType string) (DataType, error) {
	t, _, err := parseLogicalType(logicalType)
	return t, err
}

// FixedRowBytes is the bytes of a row of a field of logical type lt
// whose rows are fixed width (a fixed-width primitive other than bool, or
// a fixed-size list of one: a vector), else 0.
func FixedRowBytes(lt string) int {
	t, item, err := parseLogicalType(lt)
	switch {
	case err != nil || t.Kind == KindBool:
		return 0
	case t.Kind == KindFixedSizeList:
		if item == nil || item.Kind == KindBool || t.Size <= 0 {
			return 0
		}
		return t.Size * item.ByteWidth()
	}
	return t.ByteWidth()
}

// parseLogicalType reads Lance's type string. For a fixed-size list of a
// primitive it also returns the item type (such lists have no child field
// in the schema).
func parseLogicalType(s string) (DataType, *DataType, error) {
	if t, ok := primitiveTypes[s]; ok {
		return t, nil, nil
	}
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("%w: unsupported logical type %q", ErrFormat, s)
	switch parts[0] {
	case "timestamp":
		if len(parts) < 3 {
			return DataType{}, nil, bad
		}
		switch parts[1] {
		case "s", "ms", "us", "ns":
		default:
			return DataType{}, nil, bad
		}
		tz := strings.Join(parts[2:], ":")
		if tz == "-" {
			tz = ""
		}
		return DataType{Kind: KindTimestamp, Unit: parts[1], TZ: tz}, nil, nil
	case "decimal":
		if len(parts) != 4 {
			return DataType{}, nil, bad
		}
		p, e1 := strconv.Atoi(parts[2])
		sc, e2 := strconv.Atoi(parts[3])
		if e1 != nil || e2 != nil {
			return DataType{}, nil, bad
		}
		k := KindDecimal128
		switch parts[1] {
		case "128":
		case "256":
			k = KindDecimal256
		default:
			return DataType{}, nil, bad
		}
		return DataType{Kind: k, Precision: p, Scale: sc}, nil, nil
	case "dict":
		// dict:VALUE:INDEX:ORDERED. Dictionaries of strings, binaries,
		// numbers (integers, floats) and booleans are accepted: those are
		// what LanceDB writes and what the corpus checks against it.
		if len(parts) < 4 {
			return DataType{}, nil, bad
		}
		v, ok := primitiveTypes[strings.Join(parts[1:len(parts)-2], ":")]
		if !ok || !v.IsVariable() && (v.Kind < KindBool || v.Kind > KindFloat64) {
			return DataType{}, nil, bad
		}
		ix, ok := primitiveTypes[parts[len(parts)-2]]
		if !ok || ix.Kind < KindInt8 || ix.Kind > KindUint64 {
			return DataType{}, nil, bad
		}
		switch parts[len(parts)-1] {
		case "false":
		case "true":
			v.DictOrdered = true
		default:
			return DataType{}, nil, bad
		}
		v.DictIndex = ix.Kind
		return v, nil, nil
	case "fixed_size_binary":
		if len(parts) != 2 {
			return DataType{}, nil, bad
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil || n <= 0 || n > 1<<24 {
			return DataType{}, nil, bad
		}
		return DataType{Kind: KindFixedSizeBinary, Size: n}, nil, nil
	case "fixed_size_list":
		if len(parts) < 3 {
			return DataType{}, nil, bad
		}
		n, err := strconv.Atoi(parts[len(parts)-1])
		if err != nil || n <= 0 || n > 1<<24 {
			return DataType{}, nil, bad
		}
		inner := strings.Join(parts[1:len(parts)-1], ":")
		t := DataType{Kind: KindFixedSizeList, Size: n}
		if inner == "struct" {
			return t, nil, nil
		}
		it, sub, err := parseLogicalType(inner)
		if err != nil || sub != nil || it.Kind == KindStruct || it.Kind == KindList || it.Kind == KindLargeList {
			return DataType{}, nil, bad
		}
		return t, &it, nil
	}
	return DataType{}, nil, bad
}

// newSchema builds the tree from the pre-order field list.
func newSchema(pf []*lancepb.Field, v Version) (*Schema, error) {
	s := &Schema{version: v}
	byID := map[int32]*Field{}
	for _, p := range pf {
		t, item, err := parseLogicalType(p.GetLogicalType())
		if err != nil {
			return nil, fmt.Errorf("%w (field %q)", err, p.GetName())
		}
		f := &Field{Name: p.GetName(), ID: p.GetId(), Type: t, Nullable: p.GetNullable(), Column: -1}
		if md := p.GetMetadata(); len(md) > 0 {
			f.Metadata = make(map[string]string, len(md))
			for k, v := range md {
				f.Metadata[k] = string(v)
			}
		}
		if item != nil {
			// Fixed-size lists of primitives carry their item type in the
			// type string; give them a child so the tree is uniform.
			f.Children = []*Field{{Name: "item", ID: -1, Type: *item, Nullable: true, Column: -1}}
		}
		if _, dup := byID[f.ID]; dup {
			return nil, errf("duplicate field id %d", f.ID)
		}
		byID[f.ID] = f
		if p.GetParentId() < 0 {
			s.Fields = append(s.Fields, f)
			continue
		}
		parent := byID[p.GetParentId()]
		if parent == nil {
			return nil, errf("field %q names parent %d, not seen before it", f.Name, p.GetParentId())
		}
		parent.Children = append(parent.Children, f)
	}
	for _, f := range s.Fields {
		if err := checkField(f, 0); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func checkField(f *Field, depth int) error {
	if depth > 64 {
		return errf("schema nested deeper than 64 levels")
	}
	switch f.Type.Kind {
	case KindList, KindLargeList:
		if len(f.Children) != 1 {
			return errf("list %q has %d children", f.Name, len(f.Children))
		}
	case KindFixedSizeList:
		if len(f.Children) != 1 {
			return errf("fixed-size list %q has %d children", f.Name, len(f.Children))
		}
	case KindStruct:
	default:
		if len(f.Children) != 0 {
			return errf("%s field %q has children", f.Type, f.Name)
		}
	}
	for _, c := range f.Children {
		if err := checkField(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// Packed reports whether a struct is stored packed, as one column of
// rows (field metadata lance-encoding:packed, or the legacy packed, set to
// "true" in any case).
func (f *Field) Packed() bool {
	if f.Type.Kind != KindStruct {
		return false
	}
	for _, k := range [...]string{"lance-encoding:packed", "packed"} {
		if strings.EqualFold(f.Metadata[k], "true") {
			return true
		}
	}
	return false
}

// isLeaf reports whether a field's data is one column in 2.1+ files: a
// primitive, a fixed-size list of primitives (stored as one value) or a
// packed struct.
func (f *Field) isLeaf() bool {
	switch f.Type.Kind {
	case KindStruct:
		return f.Packed()
	case KindList, KindLargeList:
		return false
	case KindFixedSizeList:
		return f.Children[0].ID == -1 || f.Children[0].isLeaf() && f.Children[0].Type.Kind != KindFixedSizeList
	}
	return true
}

// bindColumns assigns column indices in schema order: in 2.1+ one per leaf;
// in 2.0 one per node (struct and list nodes have their own columns).
func (s *Schema) bindColumns(n int) error {
	next := 0
	var walk func(f *Field)
	walk = func(f *Field) {
		if s.version == V2_0 {
			f.Column = next
			next++
			if f.Type.Kind == KindFixedSizeList || f.Packed() {
				return
			}
			for _, c := range f.Children {
				walk(c)
			}
			return
		}
		if f.isLeaf() {
			f.Column = next
			next++
			return
		}
		for _, c := range f.Children {
			walk(c)
		}
	}
	for _, f := range s.Fields {
		walk(f)
	}
	if next != n {
		return errf("schema needs %d columns but the file has %d", next, n)
	}
	return nil
}
