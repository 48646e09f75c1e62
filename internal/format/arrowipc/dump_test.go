package arrowipc

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// jsData is the raw layout of one array as testdata/arrowjs.mjs prints it.
type jsData struct {
	Type     string   `json:"type"`
	Length   int      `json:"length"`
	Nulls    int      `json:"nulls"`
	Valid    []int    `json:"valid,omitempty"`
	Values   string   `json:"values,omitempty"`
	Offsets  []string `json:"offsets,omitempty"`
	Dict     []jsData `json:"dict,omitempty"`
	Children []jsData `json:"children,omitempty"`
}

type jsFile struct {
	Metadata map[string]string `json:"metadata"`
	Fields   []struct {
		Name     string            `json:"name"`
		Type     string            `json:"type"`
		Nullable bool              `json:"nullable"`
		Metadata map[string]string `json:"metadata"`
	} `json:"fields"`
	Batches [][]jsData `json:"batches"`
}

// dumpArray renders a in the same form, without the type string (the
// tests compare JS's type strings separately).
func dumpArray(a *Array) jsData {
	d := jsData{Length: a.Len, Nulls: a.NullCount}
	if a.NullCount > 0 && a.Validity != nil {
		for i := 0; i < a.Len; i++ {
			d.Valid = append(d.Valid, int(b2u8(a.IsValid(i))))
		}
	}
	switch a.Type.ID {
	case Bool:
		var sb strings.Builder
		for i := 0; i < a.Len; i++ {
			sb.WriteByte('0' + b2u8(a.Bool(i)))
		}
		d.Values = sb.String()
	case Utf8, Binary, List, LargeUtf8, LargeBinary, LargeList:
		var lo, hi int64
		if a.Offsets != nil {
			for _, o := range a.Offsets {
				d.Offsets = append(d.Offsets, strconv.Itoa(int(o)))
			}
			lo, hi = int64(a.Offsets[0]), int64(a.Offsets[a.Len])
		} else {
			for _, o := range a.LargeOffsets {
				d.Offsets = append(d.Offsets, strconv.FormatInt(o, 10))
			}
			lo, hi = a.LargeOffsets[0], a.LargeOffsets[a.Len]
		}
		if a.Type.ID != List && a.Type.ID != LargeList {
			d.Values = hex.EncodeToString(a.Values[lo:hi])
		}
	case Null, Struct, FixedSizeList:
	default:
		w := a.Type.ByteWidth()
		d.Values = hex.EncodeToString(a.Values[:a.Len*w])
	}
	if a.Dict != nil {
		d.Dict = []jsData{dumpArray(a.Dict)}
	}
	for _, c := range a.Children {
		d.Children = append(d.Children, dumpArray(c))
	}
	return d
}

// stripTypes clears the type strings of a JS dump so it compares with
// dumpArray's.
func stripTypes(d jsData) jsData {
	d.Type = ""
	for i := range d.Children {
		d.Children[i] = stripTypes(d.Children[i])
	}
	for i := range d.Dict {
		d.Dict[i] = stripTypes(d.Dict[i])
	}
	return d
}
