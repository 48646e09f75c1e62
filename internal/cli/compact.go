package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/compact"
)

func init() { extraCommands = append(extraCommands, newCompactCmd) }

func newCompactCmd(e *env) *cobra.Command {
	cfg := struct {
		TargetRowsPerFragment uint64
		DeletionThreshold     float64
		Parallelism           int
	}{TargetRowsPerFragment: 1 << 20, DeletionThreshold: 0.1, Parallelism: 4}
	deferRemap := true
	dryRun := false
	var fragments string
	var lf *lanceCompactFlags
	cmd := &cobra.Command{
		Use:   "compact URL [--defer-remap=true|false] [--target-rows N] [--deletion-threshold F] [--dry-run]",
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
			lo := compact.DefaultOptions()
			lo.TargetRowsPerFragment, lo.DeletionThreshold, lo.DeferRemap = cfg.TargetRowsPerFragment, cfg.DeletionThreshold, deferRemap
			for _, id := range only {
				lo.Fragments = append(lo.Fragments, uint64(id))
			}
			_, err = runLanceCompact(cmd, e, args[0], lo, lf, dryRun, cmd.Flags().Changed("target-rows"))
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&deferRemap, "defer-remap", true, "record a fragment-reuse version instead of rewriting the indices now")
	f.Uint64Var(&cfg.TargetRowsPerFragment, "target-rows", cfg.TargetRowsPerFragment, "fragments with fewer live rows are small; outputs hold at most this many")
	f.Float64Var(&cfg.DeletionThreshold, "deletion-threshold", cfg.DeletionThreshold, "deleted share of a fragment's rows from which it is rewritten")
	f.IntVar(&cfg.Parallelism, "parallelism", cfg.Parallelism, "at most this many groups rewritten at once (one per 256 MiB of input to re-encode)")
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
