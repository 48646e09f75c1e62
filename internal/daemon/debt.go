package daemon

import (
	"context"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/observe"
	"github.com/compactord/compactord/internal/storage"
)

// The debt a table carries, computed from the version the observer has
// already read for its sync (internal/memwal's Observer.Enrich): small
// fragments, rows no index covers, outstanding fragment-reuse versions.
// Nothing here reads the table again, except a fragment-reuse index whose
// details live in their own file, read once per table version.

// debt enriches one table's snapshots.
type debt struct {
	b      storage.Bucket
	cfg    func() JobsConfig
	logger *zap.Logger

	mu sync.Mutex
	// friVersion is the table version fri was read at.
	friVersion uint64
	fri        *fri.Index
}

// enrich fills the snapshot's debt fields from f, the version it
// summarizes.
func (d *debt) enrich(ctx context.Context, f *meta.ManifestFile, snap *observe.Snapshot) {
	if f == nil || snap == nil {
		return
	}
	target := d.cfg().Compact.TargetRowsPerFragment
	live := map[uint64]uint64{}
	for _, fr := range f.Manifest.GetFragments() {
		rows := fr.GetPhysicalRows() - min(fr.GetPhysicalRows(), fr.GetDeletionFile().GetNumDeletedRows())
		live[fr.GetId()] = rows
		if rows < target {
			snap.SmallFragments++
		}
	}
	ix := d.friIndex(ctx, f)
	for i := range snap.Indices {
		snap.Indices[i].UnindexedRows = unindexedRows(f, snap.Indices[i].Name, live, ix)
	}
	snap.FRI = friVersions(ix)
}

// unindexedRows sums the live rows of the fragments that no segment of
// index name covers, through the pending fragment-reuse versions (ix, nil
// when none) as Lance reads the index: a compacted group whose old
// fragments the index covered counts as covered. An index whose segments
// record no fragment bitmap counts as covering everything (what it covers
// is unknown).
func unindexedRows(f *meta.ManifestFile, name string, live map[uint64]uint64, ix *fri.Index) uint64 {
	covered := map[uint64]bool{}
	for _, seg := range meta.FindIndex(f.Indices, name) {
		bm, known, err := meta.FragmentBitmap(seg)
		if err != nil || !known {
			return 0
		}
		it := bm.Iterator()
		for it.HasNext() {
			covered[uint64(it.Next())] = true
		}
	}
	if ix != nil {
		for _, v := range ix.Versions {
			for _, g := range v.Groups {
				all := len(g.Old) > 0
				for _, o := range g.Old {
					all = all && covered[o.ID]
				}
				for _, n := range g.New {
					covered[n.ID] = covered[n.ID] || all
				}
			}
		}
	}
	var n uint64
	for id, rows := range live {
		if !covered[id] {
			n += rows
		}
	}
	return n
}

// friIndex is f's fragment-reuse index (nil when none), read once per
// table version (external details are a read). A failure to read it
// counts as none and is logged: the index job meets the same error and
// reports it.
func (d *debt) friIndex(ctx context.Context, f *meta.ManifestFile) *fri.Index {
	if len(meta.FindIndex(f.Indices, meta.FragReuseIndexName)) == 0 {
		return nil
	}
	v := f.Manifest.GetVersion()
	d.mu.Lock()
	if d.friVersion == v && d.fri != nil {
		ix := d.fri
		d.mu.Unlock()
		return ix
	}
	d.mu.Unlock()
	ix, err := fri.Load(ctx, d.b, f)
	if err != nil {
		if d.logger != nil {
			d.logger.Debug("could not read the fragment-reuse index for the debt gauges", zap.Error(err))
		}
		return nil
	}
	d.mu.Lock()
	d.friVersion, d.fri = v, ix
	d.mu.Unlock()
	return ix
}

// friVersions lists the outstanding fragment-reuse versions of ix.
func friVersions(ix *fri.Index) []observe.FRIVersion {
	out := []observe.FRIVersion{}
	if ix == nil {
		return out
	}
	for _, fv := range ix.Versions {
		ov := observe.FRIVersion{DatasetVersion: fv.DatasetVersion, Groups: len(fv.Groups)}
		for _, g := range fv.Groups {
			for _, o := range g.Old {
				ov.OldFragments = append(ov.OldFragments, uint32(o.ID))
			}
			for _, n := range g.New {
				ov.NewFragments = append(ov.NewFragments, uint32(n.ID))
			}
		}
		if fv.Removed != nil {
			ov.Removed = fv.Removed.GetCardinality()
		}
		out = append(out, ov)
	}
	return out
}

// conflictMetrics counts, per table, the commits that found their version
// taken by another writer: compactord_table_commit_conflicts_total.
type conflictMetrics struct{ conflicts *prometheus.CounterVec }

func newConflictMetrics(reg prometheus.Registerer) *conflictMetrics {
	return &conflictMetrics{conflicts: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{Name: "compactord_table_commit_conflicts_total",
		Help: "Commits by this instance that found the table version they were publishing taken by another writer, by table; each is rebased, retried or abandoned (compactord_commit_conflicts_total has the decisions, without the table)."},
		[]string{"table"})}
}

// conflictBucket counts the lost put-if-absent races on table versions:
// every commit publishes its version with one (storage.PutNext), so a
// lost race is a conflict with another writer, whatever the commit loop
// decides about it.
type conflictBucket struct {
	storage.Bucket
	lost func()
}

func (c *conflictBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := c.Bucket.PutIfAbsent(ctx, key, data)
	if err != nil && storage.IsAlreadyExists(err) && strings.HasPrefix(key, meta.VersionsDir) {
		c.lost()
	}
	return err
}

// First and LocalPath keep the wrapped bucket's fast paths, which a
// wrapper would otherwise hide from storage.First and the local readers.
func (c *conflictBucket) First(ctx context.Context, prefix string) (storage.Attrs, bool, error) {
	return storage.First(ctx, c.Bucket, prefix)
}

func (c *conflictBucket) LocalPath(key string) (string, bool) {
	if lp, ok := c.Bucket.(storage.LocalPather); ok {
		return lp.LocalPath(key)
	}
	return "", false
}
