// Package index reads and writes Lance's scalar index segments (btree,
// bitmap and label list, as LanceDB 0.39 / lance 12 writes them) and
// catches indexes up with the fragments they do not cover yet.
//
// A btree segment is two Lance files (format 2.2) under _indices/{uuid}/:
//
//	page_data.lance    values (the column's type, nullable), ids (uint64,
//	                   not null): every indexed row's value and row address
//	                   (fragment<<32 | offset), sorted by value with nulls
//	                   first, ties by row address
//	page_lookup.lance  min, max (the column's type, nullable), null_count,
//	                   page_idx (uint32, not null): one row per run of
//	                   batch_size rows of page_data (min and max are the
//	                   run's first and last value, null when that value is);
//	                   schema metadata batch_size="4096",
//	                   range_partitioned="false"
//
// A bitmap segment is one file, bitmap_page_lookup.lance: keys (the
// column's type, nullable; one null key holds the null rows) and bitmaps
// (binary, nullable), each a serialized RowAddrTreeMap (see RowAddrMap);
// schema metadata lance:index_stats={"num_bitmaps":N}.
//
// A label-list segment (index_version 1) is a bitmap segment keyed by the
// list's elements, plus the rows whose list is null in global buffer 1
// (schema metadata lance:label_list_nulls="1"); see labellist.go.
//
// CatchUp finds, per index, the fragments of the read version that no
// segment's fragment bitmap names, builds a delta segment over their live
// rows and commits a CreateIndex adding it (or one segment rebuilt over the
// whole version, replacing the old ones). The commit loop derives the
// MemWAL catch-up positions from the read version.
//
// Decoders treat their input as hostile: malformed files give an error
// wrapping ErrFormat, never a panic.
package index
