package cli

import (
	"time"

	"github.com/spf13/cobra"

	ltrim "github.com/compactord/compactord/internal/lance/trim"
	"github.com/compactord/compactord/internal/trim"
)

// lanceTrimHelp is appended to trim's help.
const lanceTrimHelp = `

On a Lance dataset, trim deletes a MemWAL generation only when the MemWAL index of the latest
version and of every pinned version (tagged, within --reader-grace of having been the latest,
named by an in-flight marker) records it as compacted and every maintained index that exists has
caught up to it; reasons: not_merged, index_lag, tagged, pinned_version, unreferenced_dir.
Covered WAL entries go except the newest covered one and every fence sentinel (reasons
above_replay_cursor, newest_covered, fence_sentinel). It never writes a shard manifest: the
LanceDB writer owns that chain.`

// trimNow is the clock Lance trim judges the reader grace by.
var trimNow = time.Now

// runLanceTrim runs the Lance trim when url is a Lance dataset.
func runLanceTrim(cmd *cobra.Command, e *env, url string, cfg trim.Config) (handled bool, err error) {
	b, ok, err := openLance(cmd.Context(), url)
	if err != nil || !ok {
		return err != nil, err
	}
	defer b.Close()
	lc := ltrim.Config{ReaderGrace: cfg.ReaderGrace, KeepShardManifests: cfg.KeepShardManifests, Concurrency: cfg.Concurrency, DryRun: cfg.DryRun}
	res, err := ltrim.Run(cmd.Context(), b, lc, trimNow())
	if err != nil {
		return true, err
	}
	return true, printJSON(e.stdout, res)
}
