// Package file reads and writes Lance data files (file format 2.0, 2.1
// and 2.2, as LanceDB 0.39 / lance 12 writes them) in pure Go.
//
// A file is a footer, a table of column-metadata positions, a table of
// global buffers (buffer 0 holds the schema and row count) and, per column,
// pages whose encodings are protobuf descriptions (gen/lancefilepb). In
// 2.1+ a page has a structural layout (mini-block, full-zip, constant) that
// carries repetition/definition levels, and inside it a tree of
// compressive encodings (flat, variable, FastLanes bitpacking, FSST,
// dictionary, RLE, byte-stream split, fixed-size list, zstd/lz4). In 2.0
// each schema node has its own column of ArrayEncoding pages.
//
// Use:
//
//	f, err := file.Open(readerAt, size)        // metadata only
//	b, err := f.ReadRange([]string{"id", "vec"}, 0, 1000)
//	b, err := f.Take(nil, []uint64{7, 3, 7})   // any order, repeats
//	s, err := f.Stream(nil, 8192)              // batches until io.EOF
//	ids := b.Column("id").Int64s()             // typed view, no copy
//
// Decoded data is an Array, a columnar form close to Arrow's: one values
// buffer (fixed-width values little endian, or bytes), a validity bitmap,
// int64 offsets for strings, binaries and lists, and child arrays for
// lists, fixed-size lists and structs. Nothing is boxed per value. An
// Arrow dictionary field (logical type dict:VALUE:KEY:ORDERED) decodes to
// its values; DataType.DictIndex keeps the key type, and the writer
// stores such a field as a dictionary again at the key's width, as
// LanceDB's reader requires.
//
// Internally a page decodes to a leafPage (a level stream plus a block of
// the visible values) and unravel rebuilds validity and offsets per level
// of the field's path; a writer can mirror the same steps in reverse.
//
// Writing mirrors reading: NewWriter(w, fields, WriterOptions{Version})
// takes the manifest's field list, Write takes Batches of the same Arrays
// the reader returns, and Close writes column metadata, the file
// descriptor and the footer. Pages are cut per column at about
// WriterOptions.PageBytes. 2.1+ pages are mini-block (FastLanes inline
// bitpacking for integers, flat, variable, dictionary for low-cardinality
// strings, FSST for other strings and binaries where LanceDB uses it,
// fixed-size lists, packed structs; levels out-of-line bitpacked),
// full-zip for values of 256 bytes or more (and 2.2 packed structs with
// variable-width children), or constant; 2.0 pages are ArrayEncoding
// trees. A struct whose field metadata sets lance-encoding:packed is one
// column of whole rows, read and written as LanceDB does. CopyFile and CopyColumns copy pages of another file without
// decoding them (offsets rewritten), except that CopyFile writes the rows
// of a schema with a dictionary field again, so the copied rows share a
// page dictionary. DataFileFields gives the manifest's
// DataFile fields and column indices.
//
// Everything read from the file is treated as hostile: sizes and counts
// are checked against the input before anything is allocated for them and
// malformed input gives an error wrapping ErrFormat, never a panic.
package file
