// Package fri is Lance's fragment-reuse index (FRI, the system index
// "__lance_frag_reuse"): the bookkeeping that lets a compaction commit
// without rewriting the secondary indexes, which LanceDB then applies when
// it loads an index.
//
// A row address is fragment_id<<32 | offset, where offset counts physical
// rows (deleted rows included). A deferred compaction rewrites groups of
// old fragments into new ones and appends one Version to the FRI. Per
// group, changed_row_addrs lists the old addresses that survived. Lance
// maps them in ascending address order onto the new fragments' rows (the
// new fragments in order, each 0..physical_rows); any other address of an
// old fragment maps to deleted, and an address no group touches passes
// through. Fragment ids are never reused, so applying a version to an
// index that already absorbed it changes nothing, which is why LanceDB
// applies every version to every index.
//
// Removed is compactord's additive field 4 on a version (proposed upstream
// in lance#7378, not merged): fragments some index still covers that had
// already left the manifest when the compaction read the table (every row
// deleted). They never enter a group, so without the list their addresses
// would pass through the remap and come back as ghost rows (lance#7374).
// LanceDB 12 does not know the field and keeps reading the FRI.
//
// Files:
//   - fri.go: the Go model (Digest, Group, Version, Index), Load and
//     AppendVersion (the details codec, inline or external).
//   - chain.go, remap.go, rank.go: a version chain compiled once, and the
//     remap of addresses through it (the hot path of physical remap).
//   - coverage.go: the load-time remap of an index's fragment bitmap, the
//     removed set of a new version, the straddle check for planners.
//   - trim.go: which versions no index needs any more, and the CreateIndex
//     that drops them.
//   - group.go: a group from a compaction's inputs (BuildGroup).
//   - bitmap.go: strict decoding of the roaring bitmaps involved.
//
// The rules here were read from Lance's source (lance-index
// frag_reuse.rs, lance dataset/optimize.rs and optimize/remapping.rs,
// dataset/index/frag_reuse.rs) and checked against LanceDB 0.39.
package fri
