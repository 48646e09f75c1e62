// Package vector reads and writes Lance's vector index segments (IVF_FLAT,
// IVF_PQ, IVF_SQ, IVF_RQ, IVF_HNSW_SQ, IVF_HNSW_PQ, as LanceDB 0.39 /
// lance 12 writes them) and remaps their row addresses.
//
// A segment is two Lance files (format 2.2) under _indices/{uuid}/:
//
//	index.idx      the sub-index: schema metadata lance:index
//	               ({"type","distance_type"}), lance:ivf="1" (global
//	               buffer 1 is the IVF message with the centroids tensor)
//	               and lance:flat (FLAT: one __flat_marker column, no rows)
//	               or lance:hnsw (HNSW: per partition, the graph's rows
//	               __vector_id, __neighbors, _distance and a JSON entry
//	               point and level offsets)
//	auxiliary.idx  the vector storage: _rowid (row addresses) and the
//	               quantizer's columns (flat: raw vectors; __pq_code: PQ
//	               codes, transposed per partition; __sq_code: SQ codes;
//	               _rabit_codes and factors: RQ), partition p being rows
//	               [offsets[p], offsets[p]+lengths[p]) per the IVF message
//	               in global buffer 1; storage_metadata holds the
//	               quantizer's JSON parameters, the PQ codebook is a Tensor
//	               in the global buffer its codebook_position names
//
// The IndexMetadata's index_details is a VectorIndexDetails.
//
// Remap passes every row address through a row map, drops the rows it
// reports deleted and writes the storage again with the same codes, the
// same centroids and quantizer parameters and recomputed partition
// offsets: what Lance's remap does, so a search returns the same
// distances. An HNSW graph's nodes are its partition's row numbers, so the
// graph of every partition that lost rows is rebuilt from the remapped
// storage (vectors reconstructed from the SQ or PQ codes, the partition's
// own m, ef_construction and max_level, levels from a fixed seed); the
// others are copied. IVF_RQ codes are packed per partition for lance's
// lookup-table scan (rq.go): they are unpacked on read and packed again
// on write (a remap never re-encodes); catch-up and rebuild encode new
// rows' codes and factors as lance does.
//
// Catch-up and rebuild encode new rows as the scan yields them, one batch
// of vectors in memory and every core encoding it (encode.go): nearest
// centroid, then the PQ, SQ or flat code, without retraining. Distances
// add in the order LanceDB's kernels do (kernels.go), so partition
// assignments and PQ codes are LanceDB's even on near ties. HNSW graphs
// are built in deterministic batches that use every core on one
// partition (hnsw_build.go).
//
// Decoders treat their input as hostile: malformed or unknown input gives
// a one-line error wrapping ErrFormat or ErrUnsupported, never a panic.
package vector
