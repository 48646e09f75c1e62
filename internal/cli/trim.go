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
		Short: "Retire merged, caught-up SSTables and covered WAL entries",
		Long: "Retire an SSTable only when its rows are merged, every maintained index has caught up to it " +
			"(an absent catch-up entry means not caught up), and no version that may still be read needs it: " +
			"the latest, versions that were the latest less than --reader-grace ago, tagged versions, and versions named by in-flight markers. " +
			"Every retained SSTable is reported with one reason: not_merged, index_lag (naming the index) or version_retention.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if done, err := runLanceTrim(cmd, e, args[0], cfg); done {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			t, done, err := openTable(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			defer done()
			res, err := trim.Run(cmd.Context(), t.Bucket, cfg)
			if err != nil {
				return err
			}
			return printJSON(e.stdout, res)
		},
	}
	cmd.Long += lanceTrimHelp
	cmd.Flags().BoolVar(&cfg.DryRun, "dry-run", false, "print each SSTable's verdict and reason, change nothing")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "parallel deletes")
	cmd.Flags().DurationVar(&cfg.ReaderGrace, "reader-grace", cfg.ReaderGrace, "how long a version keeps the SSTables its readers need after it stopped being the latest")
	cmd.Flags().IntVar(&cfg.KeepShardManifests, "keep-shard-manifests", cfg.KeepShardManifests, "newest shard-manifest versions to keep (at least 2)")
	return cmd
}
