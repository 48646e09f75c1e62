package cli

import (
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/table"
	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newMergeCmd) }

func newMergeCmd(e *env) *cobra.Command {
	var shard string
	var dryRun bool
	cfg := merge.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "merge URL [--shard S] [--dry-run] [--max-generations N]",
		Short: "Merge flushed MemWAL generations into the base table, per shard in generation order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cfg.Validate(); err != nil {
				return flagError(err, nil)
			}
			return runMerge(cmd, e, args[0], shard, dryRun, cfg)
		},
	}
	cmd.Long = cmd.Short + "." + mergeHelp
	cmd.Flags().StringVar(&shard, "shard", "", "merge only this shard")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan without merging")
	cmd.Flags().IntVar(&cfg.MaxGenerations, "max-generations", cfg.MaxGenerations, "bound the generations of one merge commit, and its memory; the rest land in further commits (0 = all pending in one)")
	return cmd
}

// mergeHelp is appended to merge's help.
const mergeHelp = `

On a Lance dataset, merge lands each shard's flushed MemWAL generations in the base table, in
generation order, by the table's unenforced primary key (newest write wins, tombstones delete):
one commit per job, which records the shard's merged generation in the same version. It prints
one JSON line per landed commit (version, shard, generations, inserted, superseded, deleted) and
one per skipped shard with the reason; a merge that lost to another merger is a skip, not a
failure. --dry-run prints one line per planned job instead, and one line with "jobs": 0 and the
reason when there is nothing to merge.`

// mergeLine is one landed commit of a Lance merge.
type mergeLine struct {
	Operation   string   `json:"operation"`
	Version     uint64   `json:"version"`
	Shard       string   `json:"shard"`
	Generations []uint64 `json:"generations"`
	Inserted    int      `json:"inserted"`
	Superseded  int      `json:"superseded"`
	Deleted     int      `json:"deleted"`
	Attempts    int      `json:"attempts"`
}

type mergeSkip struct {
	Operation string `json:"operation"`
	Shard     string `json:"shard"`
	Skipped   bool   `json:"skipped"`
	Reason    string `json:"reason"`
}

type mergePlanLine struct {
	Operation   string   `json:"operation"`
	DryRun      bool     `json:"dry_run"`
	ReadVersion uint64   `json:"read_version"`
	Shard       string   `json:"shard"`
	Compacted   uint64   `json:"compacted_generation"`
	Generations []uint64 `json:"generations"`
	SSTables    []string `json:"sstables"`
}

// runMerge runs merge when url is a Lance dataset.
func runMerge(cmd *cobra.Command, e *env, url, shard string, dryRun bool, cfg merge.Config) error {
	ctx := cmd.Context()
	h, done, err := openHandle(ctx, e, url)
	if err != nil {
		return err
	}
	defer done()
	env := cfg.Env(shard)
	if dryRun {
		return mergeDryRun(cmd, e, h, env)
	}
	out, err := merge.RunAll(ctx, h, env)
	// What landed before an error stays landed: print it either way.
	if out != nil {
		for _, r := range out.Landed {
			line := mergeLine{Operation: "merge", Version: r.Commit.Version, Shard: r.Shard, Generations: r.Generations,
				Inserted: r.Inserted, Superseded: r.Superseded, Deleted: r.Deleted, Attempts: r.Commit.Attempts}
			if perr := printJSON(e.stdout, line); perr != nil && err == nil {
				err = perr
			}
		}
		for _, s := range out.Skipped {
			if perr := printJSON(e.stdout, mergeSkip{"merge", s.Shard, true, s.Reason}); perr != nil && err == nil {
				err = perr
			}
		}
	}
	return err
}

func mergeDryRun(cmd *cobra.Command, e *env, h *table.Handle, env merge.Env) error {
	p, err := merge.PlanLatest(cmd.Context(), h, env, nil)
	if err != nil {
		return err
	}
	for _, j := range p.Jobs {
		line := mergePlanLine{Operation: "merge", DryRun: true, ReadVersion: j.ReadVersion, Shard: j.Shard, Compacted: j.Compacted,
			Generations: []uint64{}, SSTables: []string{}}
		for _, s := range j.Generations {
			line.Generations = append(line.Generations, s.GetGeneration())
			line.SSTables = append(line.SSTables, s.GetPath())
		}
		if err := printJSON(e.stdout, line); err != nil {
			return err
		}
	}
	for _, s := range p.Skips {
		if err := printJSON(e.stdout, mergeSkip{"merge", s.Shard, true, s.Reason}); err != nil {
			return err
		}
	}
	if len(p.Jobs) == 0 {
		// Silence read as "no answer": say there is no work, and why.
		why := "no shard has flushed generations past its merged one"
		switch {
		case memwal.Index(p.Read.Indices) == nil:
			why = "the table has no MemWAL"
		case len(p.Skips) > 0:
			why = "every shard with generations is skipped (see the lines above)"
		}
		return printJSON(e.stdout, mergeNoWork{Operation: "merge", DryRun: true, ReadVersion: p.Read.Manifest.GetVersion(), Jobs: 0, Reason: "nothing to merge: " + why})
	}
	return nil
}

// mergeNoWork is a dry run's one line when there is nothing to merge.
type mergeNoWork struct {
	Operation   string `json:"operation"`
	DryRun      bool   `json:"dry_run"`
	ReadVersion uint64 `json:"read_version"`
	Jobs        int    `json:"jobs"`
	Reason      string `json:"reason"`
}
