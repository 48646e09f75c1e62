package cli

import (
	"math"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/table"
)

// lanceMergeHelp is appended to merge's help.
const lanceMergeHelp = `

On a Lance dataset, merge lands each shard's flushed MemWAL generations in the base table, in
generation order, by the table's unenforced primary key (newest write wins, tombstones delete):
one commit per job, which records the shard's merged generation in the same version. It prints
one JSON line per landed commit (version, shard, generations, inserted, superseded, deleted) and
one per skipped shard with the reason; a merge that lost to another merger is a skip, not a
failure. --dry-run prints one line per planned job instead.`

// lanceMergeLine is one landed commit of a Lance merge.
type lanceMergeLine struct {
	Operation   string   `json:"operation"`
	Version     uint64   `json:"version"`
	Shard       string   `json:"shard"`
	Generations []uint64 `json:"generations"`
	Inserted    int      `json:"inserted"`
	Superseded  int      `json:"superseded"`
	Deleted     int      `json:"deleted"`
	Attempts    int      `json:"attempts"`
}

type lanceMergeSkip struct {
	Operation string `json:"operation"`
	Shard     string `json:"shard"`
	Skipped   bool   `json:"skipped"`
	Reason    string `json:"reason"`
}

type lanceMergePlanLine struct {
	Operation   string   `json:"operation"`
	DryRun      bool     `json:"dry_run"`
	ReadVersion uint64   `json:"read_version"`
	Shard       string   `json:"shard"`
	Compacted   uint64   `json:"compacted_generation"`
	Generations []uint64 `json:"generations"`
	SSTables    []string `json:"sstables"`
}

// runLanceMerge runs merge when url is a Lance dataset.
func runLanceMerge(cmd *cobra.Command, e *env, url, shard string, dryRun bool, maxGens int) (handled bool, err error) {
	ctx := cmd.Context()
	h, ok, done, err := openLanceHandle(ctx, e, url)
	if err != nil || !ok {
		return err != nil, err
	}
	defer done()
	env := merge.Env{MaxGenerations: maxGens, Shard: shard}
	if maxGens == 0 {
		env.MaxGenerations = math.MaxInt
	}
	if dryRun {
		return true, lanceMergeDryRun(cmd, e, h, env)
	}
	out, err := merge.RunAll(ctx, h, env)
	// What landed before an error stays landed: print it either way.
	if out != nil {
		for _, r := range out.Landed {
			line := lanceMergeLine{Operation: "merge", Version: r.Commit.Version, Shard: r.Shard, Generations: r.Generations,
				Inserted: r.Inserted, Superseded: r.Superseded, Deleted: r.Deleted, Attempts: r.Commit.Attempts}
			if perr := printJSON(e.stdout, line); perr != nil && err == nil {
				err = perr
			}
		}
		for _, s := range out.Skipped {
			if perr := printJSON(e.stdout, lanceMergeSkip{"merge", s.Shard, true, s.Reason}); perr != nil && err == nil {
				err = perr
			}
		}
	}
	return true, err
}

func lanceMergeDryRun(cmd *cobra.Command, e *env, h *table.Handle, env merge.Env) error {
	p, err := merge.PlanLatest(cmd.Context(), h, env, nil)
	if err != nil {
		return err
	}
	for _, j := range p.Jobs {
		line := lanceMergePlanLine{Operation: "merge", DryRun: true, ReadVersion: j.ReadVersion, Shard: j.Shard, Compacted: j.Compacted,
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
		if err := printJSON(e.stdout, lanceMergeSkip{"merge", s.Shard, true, s.Reason}); err != nil {
			return err
		}
	}
	return nil
}
