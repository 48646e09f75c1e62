// Package observe holds what an observation of a table finds: the
// Snapshot the status API shows and the scheduler reads (its fingerprint,
// the pending generations). It is plain data: the format packages fill it
// (internal/memwal observes Lance tables), the scheduler reads it without
// knowing the format.
package observe

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Snapshot is what a sync learns about a table: the status API's view and
// the source of the LSM-debt gauges.
type Snapshot struct {
	// Format is the table's format: "lance" (FormatLance).
	Format    string    `json:"format"`
	Version   uint64    `json:"version"`
	Timestamp time.Time `json:"timestamp"`
	Operation string    `json:"operation,omitempty"`
	Fragments int       `json:"fragments"`
	// SmallFragments are the fragments with fewer live rows than
	// compaction's target (compaction debt); filled by the observer's
	// owner, which knows the target.
	SmallFragments int          `json:"small_fragments"`
	PhysicalRows   uint64       `json:"physical_rows"`
	DeletedRows    uint64       `json:"deleted_rows"`
	DataBytes      uint64       `json:"data_bytes"`
	Indices        []IndexInfo  `json:"indices"`
	MemWal         bool         `json:"mem_wal"`
	Shards         []ShardInfo  `json:"shards"`
	FRI            []FRIVersion `json:"fri_versions"`
	// PendingGenerations sums ShardInfo.Pending.
	PendingGenerations uint64 `json:"pending_generations"`
}

// IndexInfo is one logical index.
type IndexInfo struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Segments int    `json:"segments"`
	// OldestDatasetVersion is the oldest segment's data version.
	OldestDatasetVersion uint64 `json:"oldest_dataset_version"`
	Maintained           bool   `json:"maintained"`
	// UnindexedRows are the live rows of the fragments no segment of the
	// index covers (0 when its segments record no fragment bitmap).
	UnindexedRows uint64 `json:"unindexed_rows"`
}

// ShardInfo is one MemWAL shard, with its generations as the timeline on
// the status page draws them: trimmed ≤ caught up ≤ merged ≤ flushed.
type ShardInfo struct {
	ID string `json:"id"`
	// Claimed is false while no writer ever claimed the shard.
	Claimed     bool   `json:"claimed"`
	WriterEpoch uint64 `json:"writer_epoch"`
	// ManifestVersion is the shard manifest's version.
	ManifestVersion uint64 `json:"manifest_version"`
	// Flushed is the newest flushed generation (0: none).
	Flushed uint64 `json:"flushed"`
	// Merged is compacted_sstables[shard] in the table's __mem_wal index.
	Merged uint64 `json:"merged"`
	// CaughtUp is the minimum over maintained indices of their catch-up
	// position (an absent entry is 0); Merged when none is maintained.
	CaughtUp uint64 `json:"caught_up"`
	// Trimmed is the highest generation ever trimmed.
	Trimmed uint64 `json:"trimmed"`
	// Pending is Flushed - Merged.
	Pending      uint64 `json:"pending_generations"`
	SSTables     int    `json:"sstables"`
	SSTableBytes uint64 `json:"sstable_bytes"`
	// Retained is SSTable bytes by why they are kept; RetainedGenerations
	// the generations (SSTables) by the same reasons.
	Retained            map[string]uint64 `json:"retained_bytes"`
	RetainedGenerations map[string]uint64 `json:"retained_generations"`
	// Lag is, per index with a catch-up entry or maintained, Merged minus
	// its catch-up position.
	Lag map[string]uint64 `json:"catchup_lag"`
	// CatchUp is the raw index_catchup entries for this shard.
	CatchUp map[string]uint64 `json:"catchup"`
	// ReplayAfterWALPosition is the replay cursor.
	ReplayAfterWALPosition uint64 `json:"replay_after_wal_position"`
}

// FRIVersion is one outstanding fragment-reuse index version.
type FRIVersion struct {
	DatasetVersion uint64   `json:"dataset_version"`
	Groups         int      `json:"groups"`
	OldFragments   []uint32 `json:"old_fragments"`
	NewFragments   []uint32 `json:"new_fragments"`
	Removed        uint64   `json:"removed_fragments"`
}

// fingerprint names the state the jobs read: the table version and each
// shard manifest's version. Nil (never synced) has none.
func (s *Snapshot) Fingerprint() string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "v%d", s.Version)
	for _, sh := range s.Shards {
		fmt.Fprintf(&b, ";%s=%d", sh.ID, sh.ManifestVersion)
	}
	return b.String()
}

// FormatLance is the table format Snapshot.Format names.
const FormatLance = "lance"

// Retained-bytes reasons: why trim keeps an SSTable (ShardInfo.Retained).
const (
	RetainedNotMerged        = "not_merged"
	RetainedIndexLag         = "index_lag"
	RetainedVersionRetention = "version_retention"
)

// RetainedReasons lists every retained-bytes reason.
var RetainedReasons = []string{RetainedNotMerged, RetainedIndexLag, RetainedVersionRetention}

// ErrNoTable: the location holds no table (yet). An observer returns an
// error that matches it with errors.Is (NoTable) while a writer has not
// created the table; the scheduler waits quietly.
var ErrNoTable = errors.New("no table here yet")

// NoTable marks err as "no table here yet", keeping its message.
func NoTable(err error) error {
	if err == nil {
		return nil
	}
	return &noTableError{err}
}

type noTableError struct{ err error }

func (e *noTableError) Error() string        { return e.err.Error() }
func (e *noTableError) Unwrap() error        { return e.err }
func (e *noTableError) Is(target error) bool { return target == ErrNoTable }
