// Package fri is the fragment-reuse index (FRI): the bookkeeping that lets a
// compaction defer rewriting secondary indices.
//
// A row address is fragment_id<<32 | offset, where offset counts physical rows
// (deleted rows included). A deferred compaction rewrites groups of old
// fragments into new ones and commits one FragReuseVersion to the system index
// "__frag_reuse" instead of rewriting the indices. Each version says, per
// group, which old addresses survived; survivors keep their order, are
// concatenated in old_fragments order and are split across new_fragments by
// physical_rows. removed_fragments lists fragments an index still covers that
// had already left the manifest (every row deleted): they never enter a
// group, so without the list their addresses would pass through the remap and
// come back as ghost rows (Lance #7374).
//
// The package is pure: no I/O, no clocks, no package-level state. Its parts:
//
//   - chain.go: Compile a version chain once and Remap addresses through it
//     (the hot path of query-time translation and of physical remap).
//   - coverage.go: load-time remap of a segment's fragment bitmap, the orphan
//     set, the straddle check for the planner and the skip rule.
//   - trim.go: which segments still need a physical remap and which versions
//     can be trimmed.
//   - group.go: build a group from a compaction's inputs.
//   - bitmap.go: strict (de)serialization of the roaring bitmaps involved.
//
// Versions are always ordered oldest to newest and carry the table version the
// compaction committed as (dataset_version). A segment whose dataset_version
// is below a version's was built from data that may still hold that version's
// old addresses; at or above it, the segment has absorbed it.
package fri
