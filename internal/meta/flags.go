package meta

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/jobclass"
)

// Feature flags, shared by manifest fields reader_feature_flags and
// writer_feature_flags. A reader (writer) must refuse a table carrying a bit
// it does not implement.
const (
	FlagDeletionFiles    uint64 = 1 << 0
	FlagStableRowIDs     uint64 = 1 << 1
	FlagUseV2Format      uint64 = 1 << 2 // deprecated, still set by old writers
	FlagTableConfig      uint64 = 1 << 3
	FlagBasePaths        uint64 = 1 << 4
	FlagNoTxnFiles       uint64 = 1 << 5
	FlagDataOverlays     uint64 = 1 << 6
	FlagCoveringIndexes  uint64 = 1 << 7
	FlagPerFileVersions  uint64 = 1 << 8
	knownFlags                  = 1<<9 - 1
	flagNameUnknownOffer        = "unknown"
)

var flagNames = map[uint64]string{
	FlagDeletionFiles:   "deletion files",
	FlagStableRowIDs:    "stable row ids",
	FlagUseV2Format:     "v2 format",
	FlagTableConfig:     "table config",
	FlagBasePaths:       "multiple base paths",
	FlagNoTxnFiles:      "no transaction files",
	FlagDataOverlays:    "data overlay files",
	FlagCoveringIndexes: "covering indexes",
	FlagPerFileVersions: "per-file data file versions",
	// Lance 13 and 14 define these; compactord implements none of them, so
	// they stay outside knownFlags and every check refuses them. Named
	// here only so the refusal says what the table uses.
	FlagFragReuseStableRowIDs: "fragment reuse with stable row ids",
	FlagFragmentReuseIndex:    "fragment-reuse index",
	FlagManagedBlobs:          "managed blobs",
}

// Flags newer Lance writers set (13: 512, 1024; 14: 2048). Not implemented.
const (
	FlagFragReuseStableRowIDs uint64 = 1 << 9
	FlagFragmentReuseIndex    uint64 = 1 << 10
	FlagManagedBlobs          uint64 = 1 << 11
)

// ReadableFlags are the reader flags whose meaning compactord implements for
// reading metadata. Data overlays change what a data file's rows are, so a
// table with them is readable as metadata only (see CheckDataRead).
const ReadableFlags = FlagDeletionFiles | FlagStableRowIDs | FlagUseV2Format | FlagTableConfig |
	FlagNoTxnFiles | FlagBasePaths | FlagDataOverlays | FlagCoveringIndexes

// WritableFlags are the writer flags compactord implements when it commits:
// it keeps deletion files, config, stable row-id sequences it does not move,
// and honours "no transaction files". Base paths (files outside the table
// root), overlays, covering indexes and per-file versions are refused: a
// writer that half-understood them would maintain the table wrongly.
const WritableFlags = FlagDeletionFiles | FlagStableRowIDs | FlagUseV2Format | FlagTableConfig | FlagNoTxnFiles

// ErrUnsupportedFeature is what every FeatureError wraps: its default job
// class quarantines the table as unsupported_feature (jobclass), so the
// daemon shows a table a newer Lance wrote as held back, not as failing.
var ErrUnsupportedFeature = jobclass.Weak(jobclass.Error, jobclass.ReasonUnsupported, errors.New("unsupported Lance feature"))

// FeatureError names the flags that stop an operation.
type FeatureError struct {
	Write bool
	Bits  uint64
}

// Unwrap makes errors.Is(err, ErrUnsupportedFeature) hold.
func (e *FeatureError) Unwrap() error { return ErrUnsupportedFeature }

func (e *FeatureError) Error() string {
	verb, gerund := "read", "reading"
	if e.Write {
		verb, gerund = "write", "writing"
	}
	return fmt.Sprintf("cannot %s this table: it uses Lance features compactord does not implement for %s: %s", verb, gerund, describeFlags(e.Bits))
}

func describeFlags(bs uint64) string {
	var names []string
	for bs != 0 {
		bit := uint64(1) << bits.TrailingZeros64(bs)
		bs &^= bit
		if n, ok := flagNames[bit]; ok {
			names = append(names, fmt.Sprintf("%s (flag %d)", n, bit))
		} else {
			names = append(names, fmt.Sprintf("%s flag %d", flagNameUnknownOffer, bit))
		}
	}
	return strings.Join(names, ", ")
}

// CheckRead refuses a manifest whose reader flags compactord cannot honour.
func CheckRead(m *pb.Manifest) error {
	if extra := m.GetReaderFeatureFlags() &^ ReadableFlags; extra != 0 {
		return &FeatureError{Bits: extra}
	}
	return nil
}

// CheckWrite refuses to commit on top of a manifest whose writer flags
// compactord does not implement.
func CheckWrite(m *pb.Manifest) error {
	if err := CheckRead(m); err != nil {
		return err
	}
	if extra := m.GetWriterFeatureFlags() &^ WritableFlags; extra != 0 {
		return &FeatureError{Write: true, Bits: extra}
	}
	return nil
}

// CheckMaintain refuses a step that changes the table's files without
// committing (trim deletes MemWAL generations, cleanup deletes versions
// and unreferenced files) on a manifest with a flag compactord does not
// implement for writing. Such a step never reaches the commit loop's
// CheckWrite, and a writer flag it does not know may mean files kept in a
// layout it does not model (Lance 13's fragment-reuse row maps under
// _fri/), which it would take for garbage. It is CheckWrite, named for
// the callers that must not skip it.
func CheckMaintain(m *pb.Manifest) error { return CheckWrite(m) }

// RecomputeFlags sets the flags of a new manifest from its content, as Lance
// does on every commit: deletion files and config follow the manifest, the
// table-wide choices (stable row ids, no transaction files, base paths) stay
// as the previous version had them.
func RecomputeFlags(m *pb.Manifest, prevReader, prevWriter uint64) {
	sticky := FlagStableRowIDs | FlagNoTxnFiles | FlagBasePaths | FlagUseV2Format | FlagDataOverlays | FlagCoveringIndexes | FlagPerFileVersions | ^uint64(knownFlags)
	r, w := prevReader&sticky, prevWriter&sticky
	for _, f := range m.GetFragments() {
		if f.GetDeletionFile() != nil {
			r |= FlagDeletionFiles
			w |= FlagDeletionFiles
			break
		}
	}
	if len(m.GetConfig()) > 0 {
		r |= FlagTableConfig
		w |= FlagTableConfig
	}
	m.ReaderFeatureFlags, m.WriterFeatureFlags = r, w
}
