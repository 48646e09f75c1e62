package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/compact"
	lcompact "github.com/compactord/compactord/internal/lance/compact"
)

func init() { extraCommands = append(extraCommands, newCompactCmd) }

func newCompactCmd(e *env) *cobra.Command {
	cfg := compact.DefaultConfig()
	deferRemap := true
	dryRun := false
	var fragments string
	var lf *lanceCompactFlags
	cmd := &cobra.Command{
		Use:   "compact URL [--defer-remap=true|false] [--target-rows N] [--deletion-threshold F] [--max-group-bytes B] [--dry-run]",
		Short: "Rewrite small or deletion-heavy fragments into fewer, larger ones",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.TargetRowsPerFragment == 0 {
				return fmt.Errorf("--target-rows must be positive")
			}
			if !(cfg.DeletionThreshold > 0 && cfg.DeletionThreshold <= 1) {
				return fmt.Errorf("--deletion-threshold must be in (0, 1], got %v", cfg.DeletionThreshold)
			}
			if cfg.Parallelism < 1 {
				return fmt.Errorf("--parallelism must be at least 1, got %d", cfg.Parallelism)
			}
			only, err := parseFragmentIDs(fragments)
			if err != nil {
				return err
			}
			lo := lcompact.DefaultOptions()
			lo.TargetRowsPerFragment, lo.DeletionThreshold, lo.DeferRemap = cfg.TargetRowsPerFragment, cfg.DeletionThreshold, deferRemap
			for _, id := range only {
				lo.Fragments = append(lo.Fragments, uint64(id))
			}
			if handled, err := runLanceCompact(cmd, e, args[0], lo, lf, dryRun, cmd.Flags().Changed("target-rows")); handled || err != nil {
				return err
			}
			cfg.InlineRemap = !deferRemap
			t, done, err := openWriter(cmd.Context(), e, args[0], "compact")
			if err != nil {
				return err
			}
			defer done()
			c, err := compact.New(cfg, t, e.logger, nil)
			if err != nil {
				return err
			}
			if dryRun {
				read, jobs, err := c.Plan(cmd.Context(), only)
				if err != nil {
					return err
				}
				if jobs == nil {
					jobs = []compact.Job{}
				}
				return printJSON(e.stdout, map[string]any{"version": read.Version, "operation": "compact", "dry_run": true, "jobs": jobs})
			}
			out, err := c.Run(cmd.Context(), only)
			if err != nil {
				return err
			}
			doc := map[string]any{"version": out.Read.Version, "operation": "compact", "defer_remap": deferRemap, "groups": 0}
			if out.Result != nil {
				doc["version"] = out.Result.Manifest.Version
				doc["groups"] = out.Stats.Groups
				doc["fragments_in"] = out.Stats.FragmentsIn
				doc["fragments_out"] = out.Stats.FragmentsOut
				doc["rows"] = out.Stats.Rows
				doc["bytes_read"] = out.Stats.BytesRead
				doc["bytes_written"] = out.Stats.BytesWritten
				doc["row_groups_copied"] = out.Stats.RowGroupsCopied
				doc["rows_rewritten"] = out.Stats.RowsRewritten
				doc["index_segments_rewritten"] = out.Stats.IndexSegmentsRewritten
				doc["attempts"] = out.Result.Attempts
				doc["rebased"] = out.Result.Rebased
			}
			return printJSON(e.stdout, doc)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&deferRemap, "defer-remap", true, "record a fragment-reuse version instead of rewriting the indices now")
	f.Uint64Var(&cfg.TargetRowsPerFragment, "target-rows", cfg.TargetRowsPerFragment, "fragments with fewer live rows are small; outputs hold at most this many")
	f.Float64Var(&cfg.DeletionThreshold, "deletion-threshold", cfg.DeletionThreshold, "deleted share of a fragment's rows from which it is rewritten")
	f.Uint64Var(&cfg.MaxBytesPerGroup, "max-group-bytes", cfg.MaxBytesPerGroup, "input bytes per group (0: unbounded)")
	f.IntVar(&cfg.Parallelism, "parallelism", cfg.Parallelism, "groups rewritten at once")
	f.StringVar(&fragments, "fragments", "", "only consider these fragment ids (comma separated)")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan as JSON and change nothing")
	lf = addLanceCompactFlags(cmd)
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
