package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/table"
)

// The status page's "next compaction" section: the compaction planner's
// answer on the table's latest version with the daemon's jobs.compact
// settings, so that an operator sees which fragments the next compact job
// would take and why, and which it leaves out and why, without running it.

// planView is one table's next-compaction plan as the page draws it.
type planView struct {
	ReadVersion uint64
	Groups      []planGroup
	Skips       []compact.Skip
	// Target and Threshold are the settings the plan was made with.
	Target    uint64
	Threshold float64
	Err       string
}

type planGroup struct {
	// Fragments are "id (reason)", in id order.
	Fragments []string
	LiveRows  uint64
}

// planCache keeps each table's plan for the version it was made on: the
// page refreshes every few seconds and a plan reads the latest manifest.
type planCache struct {
	mu      sync.Mutex
	handles map[string]*table.Handle
	plans   map[string]planEntry
}

type planEntry struct {
	version uint64
	opts    compact.Options
	view    *planView
}

func (c *planCache) setHandle(name string, h *table.Handle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handles == nil {
		c.handles = map[string]*table.Handle{}
	}
	c.handles[name] = h
}

func (c *planCache) drop(name string, h *table.Handle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handles[name] == h {
		delete(c.handles, name)
		delete(c.plans, name)
	}
}

// planFor returns the plan of table name at the version the status page
// shows (its last sync), planning again only when that version or the
// settings changed. nil: the table is not open.
func (c *planCache) planFor(ctx context.Context, name string, version uint64, o compact.Options) *planView {
	c.mu.Lock()
	h := c.handles[name]
	e, ok := c.plans[name]
	c.mu.Unlock()
	if h == nil {
		return nil
	}
	if ok && e.version == version && equalOptions(e.opts, o) {
		return e.view
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v := &planView{Target: o.TargetRowsPerFragment, Threshold: o.DeletionThreshold}
	p, _, _, err := compact.PlanLatest(ctx, h, o)
	if err != nil {
		// One line: the page shows it in place of the plan.
		v.Err = strings.ReplaceAll(err.Error(), "\n", "; ")
	} else {
		v.ReadVersion = p.ReadVersion
		v.Skips = p.Skips
		for _, g := range p.Groups {
			cs := append([]compact.Candidate(nil), g.Candidates...)
			sort.Slice(cs, func(i, j int) bool { return cs[i].Fragment.GetId() < cs[j].Fragment.GetId() })
			pg := planGroup{LiveRows: g.LiveRows()}
			for _, cd := range cs {
				pg.Fragments = append(pg.Fragments, fmt.Sprintf("%d (%s)", cd.Fragment.GetId(), cd.Reason))
			}
			v.Groups = append(v.Groups, pg)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handles[name] == h {
		if c.plans == nil {
			c.plans = map[string]planEntry{}
		}
		c.plans[name] = planEntry{version: version, opts: o, view: v}
	}
	return v
}

func equalOptions(a, b compact.Options) bool {
	return a.TargetRowsPerFragment == b.TargetRowsPerFragment && a.DeletionThreshold == b.DeletionThreshold &&
		a.MaterializeDeletions == b.MaterializeDeletions && a.MaxBytesPerFile == b.MaxBytesPerFile
}
