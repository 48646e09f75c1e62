package cli

import (
	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/table"
)

func init() { extraCommands = append(extraCommands, newMergeCmd) }

type planJob struct {
	Shard       string   `json:"shard"`
	ReadVersion uint64   `json:"read_version"`
	From        uint64   `json:"from_generation"`
	Through     uint64   `json:"through_generation"`
	SSTables    []string `json:"sstables"`
}

type blockedShard struct {
	Shard  string `json:"shard"`
	Reason string `json:"reason"`
}

func newMergeCmd(e *env) *cobra.Command {
	var shard string
	var dryRun bool
	var maxGens int
	cmd := &cobra.Command{
		Use:   "merge URL [--shard S] [--dry-run] [--max-generations N]",
		Short: "Merge flushed SSTables into the base table, per shard in generation order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if handled, err := runLanceMerge(cmd, e, args[0], shard, dryRun, maxGens); handled || err != nil {
				return err
			}
			ctx := cmd.Context()
			t, done, err := openWriter(ctx, e, args[0], "merge")
			if err != nil {
				return err
			}
			defer done()
			mg, err := merge.New(merge.Config{MaxGenerations: maxGens, Logger: e.logger}, t)
			if err != nil {
				return err
			}
			if dryRun {
				head, jobs, blocked, err := mg.PlanLatest(ctx, shard)
				if err != nil {
					return err
				}
				plan, bl := []planJob{}, []blockedShard{}
				for _, j := range jobs {
					pj := planJob{Shard: j.Shard, ReadVersion: j.ReadVersion, From: j.From, Through: j.Through, SSTables: []string{}}
					for _, s := range j.SSTables {
						pj.SSTables = append(pj.SSTables, s.Path)
					}
					plan = append(plan, pj)
				}
				for _, b := range blocked {
					bl = append(bl, blockedShard{b.Shard, b.Reason})
				}
				return printJSON(e.stdout, map[string]any{"operation": "merge", "dry_run": true, "version": head.Version, "plan": plan, "blocked": bl})
			}
			results, err := mg.Run(ctx, shard)
			if err != nil {
				return err
			}
			head, err := table.ReadLatest(ctx, t.Bucket)
			if err != nil {
				return err
			}
			if results == nil {
				results = []merge.Result{}
			}
			return printJSON(e.stdout, map[string]any{"operation": "merge", "dry_run": false, "version": head.Version, "merged": results})
		},
	}
	cmd.Long = cmd.Short + "." + lanceMergeHelp
	cmd.Flags().StringVar(&shard, "shard", "", "merge only this shard")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan without merging")
	cmd.Flags().IntVar(&maxGens, "max-generations", 0, "bound the generations of one merge commit (0 = all pending)")
	return cmd
}
