package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/table"
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

// cleanupNow is the clock cleanup judges ages by; tests move it.
var cleanupNow = time.Now

func newCleanupCmd(e *env) *cobra.Command {
	cfg := cleanup.Config{Policy: cleanup.DefaultPolicy(), Concurrency: 16}
	cmd := &cobra.Command{
		Use:   "cleanup URL [--retain-versions N] [--older-than D] [--min-age D] [--concurrency C] [--dry-run]",
		Short: "Delete versions outside retention, then files no retained version references",
		Long: `Delete versions outside retention, then files no retained version references.

A version is kept when it is the latest; when it is younger than the version floor (` + table.VersionFloor.String() + `,
judged by the later of its manifest's modification time and its commit time), whatever
--retain-versions and --older-than say: the commit protocol's fast path relies on no version
that young ever being deleted, so --older-than 0s still keeps the last ` + table.VersionFloor.String() + ` of versions;
when it is among the newest --retain-versions; when it is tagged; when an in-flight job reads
at or below it; or when it is younger than --older-than. A file is kept when a kept version
references it, or when it is younger than --min-age or than the oldest in-flight job.
--dry-run prints the plan with the reason for every version and file deleted or kept
(kept_version_reasons, kept_files).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if done, err := runLanceCleanup(cmd, e, args[0], cfg); done {
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
			res, err := cleanup.Run(cmd.Context(), t.Bucket, cfg, cleanupNow())
			if err != nil {
				return err
			}
			if cfg.DryRun {
				return printJSON(e.stdout, res.Plan)
			}
			return printJSON(e.stdout, map[string]any{
				"version": res.Plan.Latest, "operation": "cleanup",
				"deleted_versions": res.DeletedVersion, "deleted_files": res.DeletedFiles,
				"bytes_reclaimed": res.BytesReclaimed, "kept_versions": len(res.Plan.KeptVersions),
				"kept_unreferenced_young_files": res.Plan.KeptYoung,
			})
		},
	}
	cmd.Long += lanceCleanupHelp
	cmd.Flags().IntVar(&cfg.Policy.RetainVersions, "retain-versions", cfg.Policy.RetainVersions, "keep the newest N versions (at least 1)")
	cmd.Flags().Var(durationFlag{&cfg.Policy.OlderThan, "older-than"}, "older-than",
		"keep every version younger than this (0s: age keeps nothing beyond the version floor)")
	cmd.Flags().Var(durationFlag{&cfg.Policy.MinAge, "min-age"}, "min-age", "never delete an unreferenced file younger than this")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "parallel deletes")
	cmd.Flags().BoolVar(&cfg.DryRun, "dry-run", false, "print the plan (what, why, bytes) and change nothing")
	return cmd
}
