package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/compact"
)

// lanceCompactHelp is appended to compact's help.
const lanceCompactHelp = `

On a Lance dataset, compact follows Lance's optimize compaction: fragments with fewer rows than
--target-rows, or whose deleted share is above --deletion-threshold, are grouped with adjacent
candidates covered by the same indexes and rewritten without their deleted rows (fragments
without deletions are copied page by page). It reserves the new fragment ids (ReserveFragments)
and commits one Rewrite with a new version of the fragment-reuse index, which LanceDB applies to
every index at load; fully deleted fragments the indexes still name are recorded as removed.
A concurrent delete of rows being rewritten is rebased onto the new fragments. It prints one
JSON line (version, groups, stats, rebased, retried). --dry-run prints the plan.`

// lanceCompactFlags are the Lance-only flags.
type lanceCompactFlags struct {
	maxRowsPerGroup   uint64
	maxBytesPerFile   uint64
	noMaterialize     bool
	fragmentsOverride string
}

func addLanceCompactFlags(cmd *cobra.Command) *lanceCompactFlags {
	lf := &lanceCompactFlags{}
	f := cmd.Flags()
	d := compact.DefaultOptions()
	f.Uint64Var(&lf.maxRowsPerGroup, "max-rows-per-group", d.MaxRowsPerGroup, "Lance tables: Lance's max_rows_per_group (accepted; compactord sizes pages by bytes)")
	f.Uint64Var(&lf.maxBytesPerFile, "max-bytes-per-file", 0, "Lance tables: cut a new data file at this size (0: Lance's 90 GB)")
	f.BoolVar(&lf.noMaterialize, "no-materialize-deletions", false, "Lance tables: do not rewrite a fragment for its deletions alone")
	cmd.Long = cmd.Short + lanceCompactHelp
	return lf
}

type lanceCompactPlanLine struct {
	Operation   string           `json:"operation"`
	DryRun      bool             `json:"dry_run"`
	ReadVersion uint64           `json:"read_version"`
	Groups      []lanceGroupLine `json:"groups"`
	Skipped     []compact.Skip   `json:"skipped"`
}

type lanceGroupLine struct {
	Fragments []uint64 `json:"fragments"`
	Reasons   []string `json:"reasons"`
	LiveRows  uint64   `json:"live_rows"`
	Indexes   []string `json:"indexes"`
}

// runLanceCompact runs compact when url is a Lance dataset.
func runLanceCompact(cmd *cobra.Command, e *env, url string, o compact.Options, lf *lanceCompactFlags, dryRun bool, targetSet bool) (handled bool, err error) {
	ctx := cmd.Context()
	h, ok, done, err := openLanceHandle(ctx, e, url)
	if err != nil || !ok {
		return err != nil, err
	}
	defer done()
	d := compact.DefaultOptions()
	if !targetSet {
		o.TargetRowsPerFragment = d.TargetRowsPerFragment
	}
	o.MaxRowsPerGroup = lf.maxRowsPerGroup
	o.MaxBytesPerFile = lf.maxBytesPerFile
	o.MaterializeDeletions = !lf.noMaterialize
	if dryRun {
		p, _, _, err := compact.PlanLatest(ctx, h, o)
		if err != nil {
			return true, err
		}
		line := lanceCompactPlanLine{Operation: "compact", DryRun: true, ReadVersion: p.ReadVersion, Groups: []lanceGroupLine{}, Skipped: p.Skips}
		if line.Skipped == nil {
			line.Skipped = []compact.Skip{}
		}
		for _, g := range p.Groups {
			gl := lanceGroupLine{LiveRows: g.LiveRows(), Indexes: g.Indexes}
			if gl.Indexes == nil {
				gl.Indexes = []string{}
			}
			for _, c := range g.Candidates {
				gl.Fragments = append(gl.Fragments, c.Fragment.GetId())
				gl.Reasons = append(gl.Reasons, string(c.Reason))
			}
			line.Groups = append(line.Groups, gl)
		}
		return true, printJSON(e.stdout, line)
	}
	res, err := compact.Run(ctx, h, o, compact.Env{})
	if err != nil {
		return true, err
	}
	doc := map[string]any{"operation": "compact", "read_version": res.Plan.ReadVersion, "defer_remap": o.DeferRemap,
		"groups": len(res.Plan.Groups), "stats": res.Stats, "rebased": res.Rebased, "retried": res.Retried}
	if res.Commit != nil {
		doc["version"] = res.Commit.Version
		doc["attempts"] = res.Commit.Attempts
		doc["removed_fragments"] = res.Removed
		if res.FragReuse != nil {
			doc["frag_reuse_index"] = fmt.Sprint(res.FragReuse.GetName())
		}
	} else {
		doc["version"] = res.Plan.ReadVersion
	}
	return true, printJSON(e.stdout, doc)
}
