package lancewal

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/arrowipc"
	"github.com/compactord/compactord/internal/format/file"
)

// A vector column is a fixed-size list of float32 (LanceDB's vector[d]):
// a chunk holds it as a fixed-width value of 4·d bytes per row, so
// taking, gathering and zero-filling rows need nothing of their own.

// maxVectorDim bounds a vector column's width (Lance's own limit on a
// fixed-size list is far above any embedding).
const maxVectorDim = 1 << 16

// vectorColumn returns the column of a field whose logical type is
// fixed_size_list:float:d, and ok=false for any other type.
func vectorColumn(f *pb.Field) (column, bool, error) {
	lt := f.GetLogicalType()
	if !strings.HasPrefix(lt, "fixed_size_list:") {
		return column{}, false, nil
	}
	parts := strings.Split(lt, ":")
	if len(parts) != 3 || parts[1] != "float" {
		return column{}, true, fmt.Errorf("column %q has type %q; the MemWAL writer handles vectors of float32 (fixed_size_list:float:d) only", f.GetName(), lt)
	}
	d, err := strconv.Atoi(parts[2])
	if err != nil || d <= 0 || d > maxVectorDim {
		return column{}, true, fmt.Errorf("column %q has type %q: bad dimension", f.GetName(), lt)
	}
	t := file.DataType{Kind: file.KindFixedSizeList, Size: d}
	return column{field: f, t: t, width: 4 * d}, true, nil
}

func (c column) isVector() bool { return c.t.Kind == file.KindFixedSizeList }

// addVector appends v, a []float32, []float64 or []any of numbers of the
// column's dimension. A bad item leaves the chunk as it was.
func (ch *chunk) addVector(v any) error {
	c := ch.col
	d := c.t.Size
	switch x := v.(type) {
	case []float32:
		if len(x) != d {
			return fmt.Errorf("column %q: a vector of %d values, want %d", c.field.GetName(), len(x), d)
		}
		for _, f := range x {
			ch.fixed = binary.LittleEndian.AppendUint32(ch.fixed, math.Float32bits(f))
		}
	case []float64:
		if len(x) != d {
			return fmt.Errorf("column %q: a vector of %d values, want %d", c.field.GetName(), len(x), d)
		}
		for _, f := range x {
			ch.fixed = binary.LittleEndian.AppendUint32(ch.fixed, math.Float32bits(float32(f)))
		}
	case []any:
		// Decoded JSON (json.Number or float64 items), as `wal write` passes it.
		if len(x) != d {
			return fmt.Errorf("column %q: a vector of %d values, want %d", c.field.GetName(), len(x), d)
		}
		for i, e := range x {
			var f float64
			var err error
			if n, ok := e.(json.Number); ok {
				f, err = n.Float64()
			} else {
				f, err = toFloat(e)
			}
			if err != nil {
				ch.fixed = ch.fixed[:len(ch.fixed)-4*i]
				return fmt.Errorf("column %q: item %d: %v", c.field.GetName(), i, err)
			}
			ch.fixed = binary.LittleEndian.AppendUint32(ch.fixed, math.Float32bits(float32(f)))
		}
	default:
		return fmt.Errorf("column %q (vector[%d]): got %T, want []float32", c.field.GetName(), d, v)
	}
	ch.valid = append(ch.valid, true)
	ch.n++
	return nil
}

// vectorFileArray is a vector chunk as a Lance fixed-size list array.
func (ch *chunk) vectorFileArray(a *file.Array) *file.Array {
	d := ch.col.t.Size
	a.Children = []*file.Array{{Type: file.DataType{Kind: file.KindFloat32}, Len: ch.n * d, Values: aligned(ch.fixed)}}
	return a
}

// vectorArrowArray is a vector chunk as an Arrow fixed-size list, items
// never null (a null vector's items are zeros under the list's null).
func (ch *chunk) vectorArrowArray(a *arrowipc.Array) *arrowipc.Array {
	d := ch.col.t.Size
	a.Children = []*arrowipc.Array{{Type: arrowipc.TFloat32, Len: ch.n * d, Values: aligned(ch.fixed)}}
	return a
}

// arrowChildren are the child fields of the column in a WAL entry's
// schema: a vector's item, nullable float32 as LanceDB declares it.
func (c column) arrowChildren() []arrowipc.Field {
	if !c.isVector() {
		return nil
	}
	return []arrowipc.Field{{Name: "item", Type: arrowipc.TFloat32, Nullable: true}}
}

// arrowVector is row i of a replayed fixed-size list of float32.
func arrowVector(a *arrowipc.Array, i int) (any, error) {
	d := int(a.Type.Size)
	if len(a.Children) != 1 || a.Children[0].Type != arrowipc.TFloat32 {
		return nil, fmt.Errorf("a fixed-size list of %s, want float32 items", a.Type)
	}
	it := a.Children[0]
	if d <= 0 || (i+1)*d > it.Len || 4*(i+1)*d > len(it.Values) {
		return nil, fmt.Errorf("vector %d is out of the buffer", i)
	}
	out := make([]float32, d)
	for e := range out {
		if !it.IsValid(i*d + e) {
			return nil, fmt.Errorf("vector %d has a null item", i)
		}
		out[e] = math.Float32frombits(binary.LittleEndian.Uint32(it.Values[4*(i*d+e):]))
	}
	return out, nil
}

// vectorAt is row i of a vector chunk (the zeros under a null).
func (ch *chunk) vectorAt(i int, out []float32) []float32 {
	d := ch.col.t.Size
	out = out[:0]
	for e := range d {
		out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(ch.fixed[4*(i*d+e):])))
	}
	return out
}

// checkFinite refuses a NaN or infinite item in row i of a vector chunk
// (no-op for other columns): LanceDB's index copy of a generation has no
// place for one. Only new writes are checked; a replayed entry keeps
// what it holds, and its copy leaves such a vector out.
func (ch *chunk) checkFinite(i int) error {
	if !ch.col.isVector() || !ch.valid[i] {
		return nil
	}
	for e, x := range ch.vectorAt(i, nil) {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("column %q: item %d is %v; vectors must be finite", ch.col.field.GetName(), e, x)
		}
	}
	return nil
}

// finite reports whether every item of v is finite.
func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}
