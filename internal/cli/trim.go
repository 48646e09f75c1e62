package cli

import (
	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/trim"
)

func init() { extraCommands = append(extraCommands, newTrimCmd) }

func newTrimCmd(e *env) *cobra.Command {
	cfg := trim.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "trim URL [--dry-run] [--concurrency C] [--keep-shard-manifests K] [--reader-grace D]",
		Short: "Delete merged, caught-up MemWAL generations and covered WAL entries",
		Long: `Delete a MemWAL generation only when the MemWAL index of the latest version and of every pinned
version (tagged, within --reader-grace of having been the latest, named by an in-flight marker)
records it as compacted and every maintained index that exists has caught up to it; reasons:
not_merged, index_lag, tagged, pinned_version, unreferenced_dir. Covered WAL entries go except the
newest covered one and every fence sentinel (reasons above_replay_cursor, newest_covered,
fence_sentinel). It never writes a shard manifest: the MemWAL writer owns that chain.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cfg.Validate(); err != nil {
				return flagError(err, nil)
			}
			b, err := openTable(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := trim.Run(cmd.Context(), b, cfg, e.clock.Now())
			if err != nil {
				return err
			}
			return printJSON(e.stdout, res)
		},
	}
	cmd.Flags().BoolVar(&cfg.DryRun, "dry-run", false, "print each generation's verdict and reason, change nothing")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "parallel deletes")
	cmd.Flags().DurationVar(&cfg.ReaderGrace, "reader-grace", cfg.ReaderGrace, "how long a version keeps the generations its readers need after it stopped being the latest")
	cmd.Flags().IntVar(&cfg.KeepShardManifests, "keep-shard-manifests", cfg.KeepShardManifests, "newest shard-manifest versions to keep (at least 2)")
	return cmd
}
