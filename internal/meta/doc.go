// Package meta is Lance's table metadata on storage: the key layout of a
// dataset, the manifest file (index section, inline transaction, manifest,
// footer), transaction files, the latest-version hint, tags and feature
// flags. The MemWAL's own format (shard manifests, the system index's
// details) is internal/memwal's.
//
// Everything here was derived from the Lance table-format specification and
// checked against files LanceDB 0.39 (lance 12) wrote. Fields compactord
// does not model survive a decode and re-encode as protobuf unknown fields,
// so a manifest compactord rewrites keeps what a newer writer recorded.
//
// Files:
//   - layout.go: key names (_versions, _transactions, data, _indices, _refs, _mem_wal)
//   - manifestfile.go: the manifest file's sections and footer
//   - flags.go: reader and writer feature flags
//   - read.go: finding and reading versions
//   - txnfile.go, hint.go, tags.go: the small side files
//   - index.go: index metadata
package meta
