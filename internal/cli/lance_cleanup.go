package cli

import (
	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/cleanup"
	lcleanup "github.com/compactord/compactord/internal/lance/cleanup"
)

// lanceCleanupHelp is appended to cleanup's help.
const lanceCleanupHelp = `

On a Lance dataset (the newest _versions/*.manifest ends in LANC) cleanup follows Lance's own
rules: a version is old when its commit time is before now - --older-than (exactly; there is no
floor) and it is not among the newest --retain-versions; the latest and tagged versions are kept
(a tag on an old version is reported as "tagged", not an error as in Lance). Files only deleted
versions reference are deleted; files no version references are deleted only when older than
--min-age, which defaults to Lance's 7 days (168h) on Lance tables. _mem_wal/ (see trim) and
_refs/ are never touched. --dry-run prints every version and file with delete/keep and a reason.`

// runLanceCleanup runs the Lance cleanup when url is a Lance dataset.
// handled is false when it is not one, and the caller goes on.
func runLanceCleanup(cmd *cobra.Command, e *env, url string, cfg cleanup.Config) (handled bool, err error) {
	b, ok, err := openLance(cmd.Context(), url)
	if err != nil || !ok {
		return err != nil, err
	}
	defer b.Close()
	opts := lcleanup.Options{RetainVersions: cfg.Policy.RetainVersions, OlderThan: cfg.Policy.OlderThan, MinAge: lcleanup.DefaultMinAge}
	if cmd.Flags().Changed("min-age") {
		opts.MinAge = cfg.Policy.MinAge
	}
	res, err := lcleanup.Run(cmd.Context(), b, lcleanup.Config{Options: opts, Concurrency: cfg.Concurrency, DryRun: cfg.DryRun}, cleanupNow())
	if err != nil {
		return true, err
	}
	if cfg.DryRun {
		return true, printJSON(e.stdout, res.Plan)
	}
	kept := len(res.Plan.Versions) - res.Plan.DeleteVersions
	return true, printJSON(e.stdout, map[string]any{
		"version": res.Plan.Latest, "operation": "cleanup", "format": "lance",
		"deleted_versions": res.DeletedVersions, "deleted_files": res.DeletedFiles,
		"bytes_reclaimed": res.BytesReclaimed, "kept_versions": kept,
		"kept_unreferenced_young_files": res.Plan.Kept[lcleanup.ReasonUnrefYoung] + res.Plan.Kept[lcleanup.ReasonUnrefInFlight],
		"tagged_old_versions":           res.Plan.TaggedOld, "spared_files": len(res.Spared),
	})
}
