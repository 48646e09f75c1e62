package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/cleanup"
)

func init() { extraCommands = append(extraCommands, newCleanupCmd) }

// durationFlag parses a non-negative Go duration ("90m", "24h") with a clear
// error; cobra's own duration flag accepts negatives.
type durationFlag struct {
	d    *time.Duration
	name string
}

func (f durationFlag) String() string { return f.d.String() }
func (f durationFlag) Type() string   { return "duration" }
func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration like 90m or 24h: %q", s)
	}
	if d < 0 {
		return fmt.Errorf("must not be negative: %q", s)
	}
	*f.d = d
	return nil
}

func newCleanupCmd(e *env) *cobra.Command {
	cfg := cleanup.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "cleanup URL [--retain-versions N] [--older-than D] [--min-age D] [--concurrency C] [--dry-run]",
		Short: "Delete old versions and the files only they reference, as Lance's cleanup does",
		Long: `Cleanup follows Lance's own rules: a version is old when its commit time is before
now - --older-than and it is not among the newest --retain-versions;
the latest and tagged versions are kept (a tag on an old version is reported as "tagged", not an
error as in Lance). Files only deleted versions reference are deleted; files no version
references are deleted only when older than --min-age (default Lance's 7 days, 168h) and named
by no in-flight marker. _mem_wal/ (see trim) and _refs/ are never touched. --dry-run prints
every version and file with delete/keep and a reason. Below 1h, --older-than and --min-age
warn (the daemon refuses them): LanceDB writers in flight leave no marker, and need both the
versions committed since their read (to detect conflicts) and their own unreferenced files.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cfg.Validate(); err != nil {
				return flagError(err, nil)
			}
			// A one-shot run is the operator's own choice: below the floor
			// the daemon refuses (ValidateFloor), the command warns.
			if !cfg.DryRun && cfg.MinAge < cleanup.InFlightFloor {
				e.warn.Warn("--min-age is below the floor: an unreferenced file of a writer's commit in flight (LanceDB's register no in-flight marker) may be deleted before the commit names it",
					zap.Duration("min_age", cfg.MinAge), zap.Duration("floor", cleanup.InFlightFloor))
			}
			if !cfg.DryRun && cfg.OlderThan < cleanup.InFlightFloor {
				e.warn.Warn("--older-than is below the floor: a LanceDB writer checks its commit for conflicts only against the versions still there, so one in flight may miss a delete or upsert this run removes and bring its rows back",
					zap.Duration("older_than", cfg.OlderThan), zap.Duration("floor", cleanup.InFlightFloor))
			}
			b, err := openTable(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := cleanup.Run(cmd.Context(), b, cfg, e.clock.Now())
			if err != nil {
				return err
			}
			if cfg.DryRun {
				return printJSON(e.stdout, res.Plan)
			}
			kept := len(res.Plan.Versions) - res.Plan.DeleteVersions
			return printJSON(e.stdout, map[string]any{
				"version": res.Plan.Latest, "operation": "cleanup", "format": "lance",
				"deleted_versions": res.DeletedVersions, "deleted_files": res.DeletedFiles,
				"bytes_reclaimed": res.BytesReclaimed, "kept_versions": kept,
				"kept_unreferenced_young_files": res.Plan.Kept[cleanup.ReasonUnrefYoung] + res.Plan.Kept[cleanup.ReasonUnrefInFlight],
				"tagged_old_versions":           res.Plan.TaggedOld, "spared_files": len(res.Spared),
			})
		},
	}
	cmd.Flags().IntVar(&cfg.RetainVersions, "retain-versions", cfg.RetainVersions, "keep the newest N versions (at least 1)")
	cmd.Flags().Var(durationFlag{&cfg.OlderThan, "older-than"}, "older-than", "keep every version younger than this (0s: age keeps nothing)")
	cmd.Flags().Var(durationFlag{&cfg.MinAge, "min-age"}, "min-age", "never delete an unreferenced file younger than this")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "parallel deletes")
	cmd.Flags().BoolVar(&cfg.DryRun, "dry-run", false, "print the plan (what, why, bytes) and change nothing")
	return cmd
}
