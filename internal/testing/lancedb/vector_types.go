package lancedb

import "fmt"

// VectorSchemaOf is VectorSchema with vec's items of type item (float16,
// float32, float64 or uint8): VectorRows' values fit it (uint8 aside).
func VectorSchemaOf(item string) []Column {
	return append(append([]Column{}, BasicSchema...), Column{Name: "vec", Type: fmt.Sprintf("fixed_size_list<%s,%d>", item, VectorDim), Nullable: true})
}

// MultivectorSchema is BasicSchema with vec a list of VectorDim-wide
// float32 vectors (LanceDB's multivector column).
var MultivectorSchema = append(append([]Column{}, BasicSchema...), Column{Name: "vec", Type: fmt.Sprintf("list<fixed_size_list<float32,%d>>", VectorDim), Nullable: true})

// BinaryVectorRows are VectorRows with vec a uint8 vector (each of
// VectorOf's values scaled to 0..254), for VectorSchemaOf("uint8").
func BinaryVectorRows(lo, hi int64, tag string) []Row {
	rows := VectorRows(lo, hi, tag)
	for i, r := range rows {
		b := make([]int, VectorDim)
		for k, x := range BinaryVectorOf(lo + int64(i)) {
			b[k] = int(x)
		}
		r["vec"] = b
	}
	return rows
}

// BinaryVectorOf is row id's vector in BinaryVectorRows, as a query
// vector (LanceDB casts it to the column's uint8).
func BinaryVectorOf(id int64) []float32 {
	v := VectorOf(id)
	for i, x := range v {
		v[i] = float32(int((x + 1) * 127))
	}
	return v
}

// MultivectorRows are VectorRows with vec two vectors: VectorOf(id) and
// VectorOf(id+1<<20).
func MultivectorRows(lo, hi int64, tag string) []Row {
	rows := VectorRows(lo, hi, tag)
	for i, r := range rows {
		r["vec"] = [][]float32{r["vec"].([]float32), VectorOf(lo + int64(i) + 1<<20)}
	}
	return rows
}
