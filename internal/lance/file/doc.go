// Package file reads Lance data files (file format 2.0, 2.1 and 2.2, as
// LanceDB 0.39 writes them) in pure Go.
//
// A file is a footer, a table of column-metadata positions, a table of
// global buffers (buffer 0 holds the schema) and, per column, pages whose
// encodings are protobuf descriptions (gen/lancefilepb). Open parses the
// metadata; Reader methods decode pages into Arrays, a columnar in-memory
// form close to Arrow's: one values buffer per array, a validity bitmap,
// offsets for variable-width and list types, and child arrays.
//
// Everything read from the file is treated as hostile: lengths are checked
// against the input before anything is allocated, and malformed input gives
// an error, never a panic.
package file
