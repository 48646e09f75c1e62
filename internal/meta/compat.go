package meta

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	pb "github.com/compactord/compactord/gen/lancepb"
)

// This file is compactord's compatibility statement: which Lance versions,
// file formats, feature flags, index kinds and metadata fields it reads,
// writes and refuses. `compactord version` prints it and docs/format.md
// carries its Markdown (Compatibility section). compat_test.go fails when a
// proto field or a flag is added without updating it, so the statement
// cannot silently fall behind what the code knows.

// FlagSupport is what compactord does with one feature-flag bit.
type FlagSupport struct {
	Bit     uint64 `json:"bit"`
	Feature string `json:"feature"`
	// Since is the Lance release that introduced the flag, when newer than 12.
	Since string `json:"since,omitempty"`
	// Read: "yes" or "refused" (reader_feature_flags).
	Read string `json:"read"`
	// Write: "yes" or "refused" (writer_feature_flags): commits, and trim
	// and cleanup, which delete without committing (CheckMaintain).
	Write string `json:"write"`
}

// IndexSupport is an index kind compactord maintains or carries.
type IndexSupport struct {
	Kind string `json:"kind"`
	// IndexVersions are the index_version values compactord has seen
	// written (lance 12) and works on.
	IndexVersions []int32 `json:"index_versions"`
	What          string  `json:"what"`
}

// Compatibility is the statement.
type Compatibility struct {
	// Lance is the Lance release whose table format compactord implements.
	Lance string `json:"lance"`
	// FileFormats are the Lance file format versions compactord reads and
	// writes; any other is refused with an error naming it.
	FileFormats []string      `json:"file_formats"`
	Flags       []FlagSupport `json:"feature_flags"`
	// OtherFlags is what happens to a bit not listed.
	OtherFlags string         `json:"other_feature_flags"`
	Indexes    []IndexSupport `json:"indexes"`
	// Newer lists what Lance 13 to 15 add that compactord knows of and how
	// it stays safe.
	Newer []string `json:"newer_lance"`
	// Fields are, per protobuf message of proto/lance, the field numbers
	// compactord names. A field outside them is carried verbatim as an
	// unknown field and never interpreted.
	Fields map[string]string `json:"known_fields"`
}

// Compat is compactord's compatibility statement.
var Compat = Compatibility{
	Lance:       "12 (LanceDB 0.39)",
	FileFormats: []string{"2.0", "2.1", "2.2"},
	Flags: []FlagSupport{
		{Bit: FlagDeletionFiles, Feature: "deletion files", Read: "yes", Write: "yes"},
		{Bit: FlagStableRowIDs, Feature: "stable row ids", Read: "yes", Write: "yes"},
		{Bit: FlagUseV2Format, Feature: "v2 format (deprecated)", Read: "yes", Write: "yes"},
		{Bit: FlagTableConfig, Feature: "table config", Read: "yes", Write: "yes"},
		{Bit: FlagBasePaths, Feature: "multiple base paths", Read: "yes", Write: "refused"},
		{Bit: FlagNoTxnFiles, Feature: "no transaction files", Read: "yes", Write: "yes"},
		{Bit: FlagDataOverlays, Feature: "data overlays", Read: "yes", Write: "refused"},
		{Bit: FlagCoveringIndexes, Feature: "covering indexes", Read: "yes", Write: "refused"},
		{Bit: FlagPerFileVersions, Feature: "per-file data versions", Read: "refused", Write: "refused"},
		{Bit: FlagFragReuseStableRowIDs, Feature: "fragment reuse with stable row ids", Since: "13", Read: "refused", Write: "refused"},
		{Bit: FlagFragmentReuseIndex, Feature: "fragment-reuse index", Since: "13", Read: "refused", Write: "refused"},
		{Bit: FlagManagedBlobs, Feature: "managed blobs", Since: "14", Read: "refused", Write: "refused"},
	},
	OtherFlags: "refused for reading and writing",
	Indexes: []IndexSupport{
		{Kind: "btree", IndexVersions: []int32{0}, What: "create, catch up, remap, rebuild, drop (row ids as lance 12 stores them)"},
		{Kind: "bitmap", IndexVersions: []int32{0}, What: "create, catch up, remap, rebuild, drop"},
		{Kind: "labellist", IndexVersions: []int32{0, 1}, What: "catch up, remap, rebuild, drop (version 1: null lists in global buffer 1)"},
		{Kind: "inverted", IndexVersions: []int32{0, 1, 2}, What: "catch up, remap, rebuild, drop (full text; read by metadata.lance's format_version, 1 or 2, whatever the index_version; LanceDB's tokenizers but icu, jieba, lindera and five stemming languages, whose indexes are left to LanceDB); a legacy index without format_version is left to LanceDB: compaction plans leave its fragments out"},
		{Kind: "vector", IndexVersions: []int32{0, 1, 2}, What: "catch up, remap, rebuild, drop: IVF_FLAT, IVF_PQ, IVF_SQ, IVF_HNSW_SQ, IVF_HNSW_PQ (version 1), IVF_RQ (version 2); see \"Lance tables: vector indexes\". Version 0 is refused by the vector reader and left to LanceDB: compaction plans leave its fragments out"},
		{Kind: "mem_wal", IndexVersions: []int32{0}, What: "system index: merge records compacted_sstables and index_catchup; trim follows it"},
		{Kind: "frag_reuse", IndexVersions: []int32{0}, What: "system index: deferred remap and trim-fri (legacy_versions only)"},
	},
	Newer: []string{
		"13.1 MemWalIndexDetails.maintain_all_indexes (field 12, number not checked against upstream): read; every non-system index is then maintained. Any MemWAL details field compactord does not name stops trim",
		"13 fragment-reuse transitions, FRI index_version 1 and _fri/ row maps: writer flag 1024 and the FRI's index_version are refused; cleanup never deletes under _fri/",
		"14 btree indexes storing row addresses (a new index version): refused wherever compactord reads or extends an index (CheckIndexVersion)",
		"15 composite transaction (116), IndexMetadata.local_fragment_aliases, file format 2.3: not implemented",
	},
	Fields: map[string]string{
		"lance.file.Dictionary":                                    "1 2",
		"lance.file.Field":                                         "1 2 3 4 5 6 7 8 9 10 12 13",
		"lance.table.BTreeIndexDetails":                            "",
		"lance.table.BasePath":                                     "1 2 3 4",
		"lance.table.BitmapIndexDetails":                           "",
		"lance.table.CompactedSsTable":                             "1 2",
		"lance.table.DataFile":                                     "1 2 3 4 5 6 7",
		"lance.table.DataFragment":                                 "1 2 3 4 5 6 7 8 9 10 11",
		"lance.table.DataOverlayFile":                              "1 2 3 4",
		"lance.table.DeletionFile":                                 "1 2 3 4 7",
		"lance.table.ExternalFile":                                 "1 2 3",
		"lance.table.FieldCoverage":                                "1",
		"lance.table.FragmentReuseIndexDetails":                    "1 2",
		"lance.table.FragmentReuseIndexDetails.FragmentDigest":     "1 2 3",
		"lance.table.FragmentReuseIndexDetails.Group":              "1 2 3",
		"lance.table.FragmentReuseIndexDetails.InlineContent":      "1",
		"lance.table.FragmentReuseIndexDetails.Version":            "1 3 4",
		"lance.table.IndexCatchupProgress":                         "1 2",
		"lance.table.IndexFile":                                    "1 2",
		"lance.table.IndexMetadata":                                "1 2 3 4 5 6 7 8 9 10 11",
		"lance.table.IndexSection":                                 "1",
		"lance.table.Manifest":                                     "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 18 19 20 21",
		"lance.table.Manifest.DataStorageFormat":                   "1 2",
		"lance.table.Manifest.WriterVersion":                       "1 2 3 4",
		"lance.table.MemWalIndexDetails":                           "1 2 3 7 8 9 10 11 12",
		"lance.table.ShardFieldEntry":                              "1 2",
		"lance.table.ShardManifest":                                "1 2 3 4 6 8 10 11 14 15",
		"lance.table.ShardingField":                                "1 2 3 4 5 6",
		"lance.table.ShardingSpec":                                 "1 2",
		"lance.table.SsTable":                                      "1 2 3 4 5",
		"lance.table.Transaction":                                  "1 2 3 4 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115",
		"lance.table.Transaction.Append":                           "1",
		"lance.table.Transaction.BloomFilter":                      "1 2 3 4",
		"lance.table.Transaction.Clone":                            "1 2 3 4 5",
		"lance.table.Transaction.CreateIndex":                      "1 2",
		"lance.table.Transaction.DataOverlay":                      "1",
		"lance.table.Transaction.DataOverlayGroup":                 "1 2",
		"lance.table.Transaction.DataReplacement":                  "1",
		"lance.table.Transaction.DataReplacementGroup":             "1 2",
		"lance.table.Transaction.Delete":                           "1 2 3",
		"lance.table.Transaction.ExactKeySetFilter":                "1",
		"lance.table.Transaction.KeyExistenceFilter":               "1 2 3",
		"lance.table.Transaction.Merge":                            "1 2 3",
		"lance.table.Transaction.Overwrite":                        "1 2 3 4 5",
		"lance.table.Transaction.Project":                          "1",
		"lance.table.Transaction.ReserveFragments":                 "1",
		"lance.table.Transaction.Restore":                          "1",
		"lance.table.Transaction.Rewrite":                          "1 2 3 4",
		"lance.table.Transaction.Rewrite.RewriteGroup":             "1 2",
		"lance.table.Transaction.Rewrite.RewrittenIndex":           "1 2 3 4 5",
		"lance.table.Transaction.UInt32List":                       "1",
		"lance.table.Transaction.Update":                           "1 2 3 4 5 6 7 8 9 10",
		"lance.table.Transaction.UpdateBases":                      "1",
		"lance.table.Transaction.UpdateConfig":                     "1 2 3 4 6 7 8 9",
		"lance.table.Transaction.UpdateConfig.FieldMetadataUpdate": "5",
		"lance.table.Transaction.UpdateMap":                        "1 2",
		"lance.table.Transaction.UpdateMapEntry":                   "1 2",
		"lance.table.Transaction.UpdateMemWalState":                "1",
		"lance.table.UUID":                                         "1",
		"lance.table.VersionAuxData":                               "3",
	},
}

// Markdown renders the statement for docs/format.md.
func (c Compatibility) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "compactord implements the table format of Lance %s.\n\n", c.Lance)
	fmt.Fprintf(&b, "**File formats** read and written: %s; any other is refused.\n\n", strings.Join(c.FileFormats, ", "))
	b.WriteString("**Feature flags** (write covers commits and the deleting steps, trim and cleanup):\n\n")
	b.WriteString("| bit | feature | since | read | write |\n|---|---|---|---|---|\n")
	for _, f := range c.Flags {
		since := f.Since
		if since == "" {
			since = "12 or earlier"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", f.Bit, f.Feature, since, f.Read, f.Write)
	}
	fmt.Fprintf(&b, "| other | unknown | | %s | |\n\n", c.OtherFlags)
	b.WriteString("**Indexes**:\n\n| kind | index_version | what compactord does |\n|---|---|---|\n")
	for _, ix := range c.Indexes {
		vs := make([]string, len(ix.IndexVersions))
		for i, v := range ix.IndexVersions {
			vs[i] = fmt.Sprint(v)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", ix.Kind, strings.Join(vs, ", "), ix.What)
	}
	b.WriteString("\n**Newer Lance** (13 to 15):\n\n")
	for _, n := range c.Newer {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n**Known fields** (field numbers per message; any other is carried verbatim, never interpreted):\n\n")
	names := make([]string, 0, len(c.Fields))
	for n := range c.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fs := c.Fields[n]
		if fs == "" {
			fs = "none"
		}
		fmt.Fprintf(&b, "- `%s`: %s\n", n, fs)
	}
	return b.String()
}

// IndexVersionError: an index segment's index_version is not one the
// statement lists for its kind. A newer Lance changed what such a segment
// stores (Lance 14's btree holds row addresses, not row ids); reading it as
// the old layout and writing segments "like" it would corrupt the index.
type IndexVersionError struct {
	Name, Kind string
	Version    int32
	Known      []int32
}

func (e *IndexVersionError) Error() string {
	return fmt.Sprintf("index %q: %s index_version %d is not one compactord implements (%v); a newer Lance wrote it", e.Name, e.Kind, e.Version, e.Known)
}

// Unwrap: the daemon holds the table back as unsupported_feature.
func (e *IndexVersionError) Unwrap() error { return ErrUnsupportedFeature }

// CheckIndexVersion refuses a segment of a kind the statement lists whose
// index_version it does not list. Kinds it does not list are the caller's
// to refuse.
func CheckIndexVersion(ix *pb.IndexMetadata) error {
	kind := IndexKind(ix)
	for _, s := range Compat.Indexes {
		if s.Kind != kind {
			continue
		}
		if slices.Contains(s.IndexVersions, ix.GetIndexVersion()) {
			return nil
		}
		return &IndexVersionError{Name: ix.GetName(), Kind: kind, Version: ix.GetIndexVersion(), Known: s.IndexVersions}
	}
	return nil
}
