package cli

import (
	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newMergeCmd) }

func newMergeCmd(e *env) *cobra.Command {
	var shard string
	var dryRun bool
	var maxGens int
	cmd := &cobra.Command{
		Use:   "merge URL [--shard S] [--dry-run] [--max-generations N]",
		Short: "Merge flushed MemWAL generations into the base table, per shard in generation order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := runLanceMerge(cmd, e, args[0], shard, dryRun, maxGens)
			return err
		},
	}
	cmd.Long = cmd.Short + "." + lanceMergeHelp
	cmd.Flags().StringVar(&shard, "shard", "", "merge only this shard")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan without merging")
	cmd.Flags().IntVar(&maxGens, "max-generations", 0, "bound the generations of one merge commit (0 = all pending)")
	return cmd
}
