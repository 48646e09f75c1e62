package lancedb

import (
	"fmt"
	"math/rand/v2"
)

// VectorDim is the width of VectorSchema's vec column.
const VectorDim = 16

// VectorSchema is BasicSchema with a vector column: vec vector[VectorDim].
var VectorSchema = append(append([]Column{}, BasicSchema...), Column{Name: "vec", Type: fmt.Sprintf("vector[%d]", VectorDim), Nullable: true})

// VectorOf is row id's vector in VectorRows: seeded by id, uniform in
// [-1, 1) per dimension, so that every row's nearest neighbour is itself.
func VectorOf(id int64) []float32 {
	r := rand.New(rand.NewPCG(uint64(id), 0x9e3779b97f4a7c15))
	v := make([]float32, VectorDim)
	for i := range v {
		v[i] = float32(r.Float64()*2 - 1)
	}
	return v
}

// VectorRows are the rows lo..hi-1 of VectorSchema: BasicRow with vec =
// VectorOf(id), s tagged tag.
func VectorRows(lo, hi int64, tag string) []Row {
	rows := make([]Row, 0, hi-lo)
	for id := lo; id < hi; id++ {
		r := BasicRow(id, fmt.Sprintf("%s%d", tag, id))
		r["vec"] = VectorOf(id)
		rows = append(rows, r)
	}
	return rows
}

// CreateVectorIndex builds a vector or full-text index on column: typ is
// ivf_pq, ivf_hnsw_sq, ivf_hnsw_pq or fts; opts are LanceDB's index
// options (numPartitions, numSubVectors, distanceType, m,
// efConstruction, ...), nil for its defaults.
func CreateVectorIndex(column, typ, name string, opts map[string]any) Step {
	s := op("createIndex", "column", column, "type", typ, "name", name)
	if opts != nil {
		s["indexOptions"] = opts
	}
	return s
}

// VectorQuery is a VectorSearch.
type VectorQuery struct {
	Vector []float32
	// Multi, when set, is a multivector query (for a list of vectors
	// column) and Vector is ignored.
	Multi [][]float32
	// Column searched ("" : LanceDB picks the only vector column).
	Column string
	// Limit is k (0: LanceDB's 10).
	Limit int
	// Where prefilters with an SQL predicate; Columns projects.
	Where   string
	Columns []string
	// BypassIndex searches exhaustively instead of through the index.
	BypassIndex bool
	// Nprobes, Ef and RefineFactor tune the index search (0: LanceDB's).
	Nprobes, Ef, RefineFactor int
	// LSM searches through the MemWAL's LSM view (true) or the base table
	// only (false); nil: LanceDB's default.
	LSM *bool
	// DistanceType is the query's metric (l2, cosine, dot; "": LanceDB's
	// l2). An exhaustive search compares with an index of another type
	// only when it is set to the index's.
	DistanceType string
}

// VectorSearch runs a nearest-neighbour query (Results.Rows; rows carry
// _distance, nearest first).
func VectorSearch(q VectorQuery) Step {
	s := op("vectorSearch", "vector", q.Vector)
	if q.Multi != nil {
		s["vector"] = jsonValue(q.Multi)
	}
	if q.Column != "" {
		s["column"] = q.Column
	}
	if q.Limit > 0 {
		s["limit"] = q.Limit
	}
	if q.Where != "" {
		s["where"] = q.Where
	}
	if q.Columns != nil {
		s["columns"] = q.Columns
	}
	if q.BypassIndex {
		s["bypassIndex"] = true
	}
	if q.Nprobes > 0 {
		s["nprobes"] = q.Nprobes
	}
	if q.Ef > 0 {
		s["ef"] = q.Ef
	}
	if q.RefineFactor > 0 {
		s["refineFactor"] = q.RefineFactor
	}
	if q.DistanceType != "" {
		s["distanceType"] = q.DistanceType
	}
	if q.LSM != nil {
		s["lsm"] = *q.LSM
	}
	return s
}

// TextSearch is a full-text query through the fts index on column ("":
// LanceDB picks it), at most limit rows (0: all), sorted by id
// (Results.Rows).
func TextSearch(query, column string, limit int, columns []string) Step {
	s := op("textSearch", "query", query)
	if column != "" {
		s["column"] = column
	}
	if limit > 0 {
		s["limit"] = limit
	}
	if columns != nil {
		s["columns"] = columns
	}
	return s
}
