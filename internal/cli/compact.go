package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/compactord/compactord/internal/compact"
	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newCompactCmd) }

func newCompactCmd(e *env) *cobra.Command {
	cfg := compact.DefaultConfig()
	// --defer-remap is jobs.compact.inline_remap negated; its default
	// follows the config's.
	deferRemap := !cfg.InlineRemap
	dryRun := false
	var fragments string
	var lf *compactFlags
	cmd := &cobra.Command{
		Use:   "compact URL [--defer-remap=true|false] [--target-rows N] [--deletion-threshold F] [--dry-run]",
		Short: "Rewrite small or deletion-heavy fragments into fewer, larger ones",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.InlineRemap = !deferRemap
			if err := cfg.Validate(); err != nil {
				return flagError(err, map[string]string{"target_rows_per_fragment": "target-rows"})
			}
			only, err := parseFragmentIDs(fragments)
			if err != nil {
				return err
			}
			lo := cfg.Options()
			for _, id := range only {
				lo.Fragments = append(lo.Fragments, uint64(id))
			}
			return runCompact(cmd, e, args[0], lo, cfg.Env(e.clock, nil), lf, dryRun)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&deferRemap, "defer-remap", deferRemap, "record a fragment-reuse version instead of remapping the indices in the same commit (opt-in: run `index remap` before LanceDB's optimize, see --help)")
	f.Uint64Var(&cfg.TargetRowsPerFragment, "target-rows", cfg.TargetRowsPerFragment, "fragments with fewer live rows are small; each group of the plan holds at least this many, spread evenly over as many fragments as this fits in (as LanceDB does)")
	f.Float64Var(&cfg.DeletionThreshold, "deletion-threshold", cfg.DeletionThreshold, "deleted share of a fragment's rows from which it is rewritten, in (0, 1]")
	f.IntVar(&cfg.Parallelism, "parallelism", cfg.Parallelism, "at most this many groups rewritten at once (one per 256 MiB of input to re-encode)")
	f.IntVar(&cfg.Replans, "replans", cfg.Replans, "plan again at most this many times after a retryable conflict")
	f.StringVar(&fragments, "fragments", "", "only consider these fragment ids (comma separated)")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan as JSON and change nothing")
	lf = addCompactFlags(cmd)
	return cmd
}

func parseFragmentIDs(s string) ([]uint32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []uint32
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--fragments: %q is not a fragment id", p)
		}
		out = append(out, uint32(v))
	}
	return out, nil
}

// compactHelp is appended to compact's help.
const compactHelp = `

On a Lance dataset, compact follows Lance's optimize compaction: fragments with fewer rows than
--target-rows, or whose deleted share is above --deletion-threshold, are grouped with adjacent
candidates covered by the same indexes and rewritten without their deleted rows (fragments
without deletions are copied page by page). It reserves the new fragment ids (ReserveFragments)
and commits one Rewrite carrying every btree, bitmap, label-list, full-text and vector segment that
covers a rewritten fragment, remapped to the new row addresses (as LanceDB's optimize does; HNSW
graphs of partitions that lost rows are rebuilt). Fragments covered by an index compactord cannot
remap (full-text in a format it does not read; HNSW with --defer-remap) are left out;
--dry-run lists them
under "skipped" with the reason. A concurrent delete of rows being rewritten is rebased onto the
new fragments. It prints one JSON line (version, groups, stats, rebased, retried).

--defer-remap=true commits a new version of the fragment-reuse index instead, which LanceDB
applies to every index at load (fully deleted fragments the indexes still name are recorded as
removed). Until 'compactord index remap' absorbs it, LanceDB's own compaction (optimize) remaps
the indexes through its row map only, over segments that still hold the old addresses: the
btree and bitmap lose rows, and deletes and merge-inserts by key miss them. Run 'index remap'
before any LanceDB maintenance of the table (the daemon does so before any other job).`

// compactFlags are the Lance-only flags.
type compactFlags struct {
	maxRowsPerGroup uint64
	maxBytesPerFile uint64
	noMaterialize   bool
}

func addCompactFlags(cmd *cobra.Command) *compactFlags {
	lf := &compactFlags{}
	f := cmd.Flags()
	d := compact.DefaultOptions()
	f.Uint64Var(&lf.maxRowsPerGroup, "max-rows-per-group", d.MaxRowsPerGroup, "Lance tables: Lance's max_rows_per_group (accepted; compactord sizes pages by bytes)")
	f.Uint64Var(&lf.maxBytesPerFile, "max-bytes-per-file", 0, "Lance tables: cut a new data file at this size (0: Lance's 90 GB)")
	f.BoolVar(&lf.noMaterialize, "no-materialize-deletions", false, "Lance tables: do not rewrite a fragment for its deletions alone")
	cmd.Long = cmd.Short + compactHelp
	return lf
}

type compactPlanLine struct {
	Operation   string         `json:"operation"`
	DryRun      bool           `json:"dry_run"`
	ReadVersion uint64         `json:"read_version"`
	Groups      []groupLine    `json:"groups"`
	Skipped     []compact.Skip `json:"skipped"`
}

type groupLine struct {
	Fragments []uint64 `json:"fragments"`
	Reasons   []string `json:"reasons"`
	LiveRows  uint64   `json:"live_rows"`
	Indexes   []string `json:"indexes"`
}

// runCompact runs compact when url is a Lance dataset.
func runCompact(cmd *cobra.Command, e *env, url string, o compact.Options, env compact.Env, lf *compactFlags, dryRun bool) error {
	ctx := cmd.Context()
	h, done, err := openHandle(ctx, e, url)
	if err != nil {
		return err
	}
	defer done()
	o.MaxRowsPerGroup = lf.maxRowsPerGroup
	o.MaxBytesPerFile = lf.maxBytesPerFile
	o.MaterializeDeletions = !lf.noMaterialize
	if dryRun {
		p, _, _, err := compact.PlanLatest(ctx, h, o)
		if err != nil {
			return err
		}
		line := compactPlanLine{Operation: "compact", DryRun: true, ReadVersion: p.ReadVersion, Groups: []groupLine{}, Skipped: p.Skips}
		if line.Skipped == nil {
			line.Skipped = []compact.Skip{}
		}
		for _, g := range p.Groups {
			gl := groupLine{LiveRows: g.LiveRows(), Indexes: g.Indexes}
			if gl.Indexes == nil {
				gl.Indexes = []string{}
			}
			for _, c := range g.Candidates {
				gl.Fragments = append(gl.Fragments, c.Fragment.GetId())
				gl.Reasons = append(gl.Reasons, string(c.Reason))
			}
			line.Groups = append(line.Groups, gl)
		}
		return printJSON(e.stdout, line)
	}
	res, err := compact.Run(ctx, h, o, env)
	if err != nil {
		return err
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
	return printJSON(e.stdout, doc)
}
