package cli

import (
	"strings"

	"github.com/spf13/cobra"

	lindex "github.com/compactord/compactord/internal/lance/index"
)

// lanceCatchupHelp is appended to index catchup's help.
const lanceCatchupHelp = `

On a Lance dataset, catch-up covers every btree and bitmap index's missing fragments (those of
the latest version no segment's fragment bitmap names) with a delta segment over their live rows,
all in one CreateIndex; --rebuild (or an index reaching --max-segments) replaces the index's
segments with one over the whole version. A MemWAL table's index_catchup then records the
generations the read version had merged, so trim can delete them.`

// runLanceCatchup runs `index catchup` when url is a Lance dataset.
func runLanceCatchup(cmd *cobra.Command, e *env, url, names string) (handled bool, err error) {
	h, ok, done, err := openLanceHandle(cmd.Context(), e, url)
	if err != nil || !ok {
		return err != nil, err
	}
	defer done()
	o := lindex.Options{}
	if names != "" {
		for _, n := range strings.Split(names, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.Indices = append(o.Indices, n)
			}
		}
	}
	if o.Rebuild, err = cmd.Flags().GetBool("rebuild"); err != nil {
		return true, err
	}
	if o.MaxSegments, err = cmd.Flags().GetInt("max-segments"); err != nil {
		return true, err
	}
	res, err := lindex.CatchUp(cmd.Context(), h, o)
	if err != nil {
		return true, err
	}
	return true, printJSON(e.stdout, map[string]any{"version": res.Version, "read_version": res.ReadVersion,
		"operation": "index_catchup", "committed": res.Committed, "indices": res.Indices, "skipped": res.Skipped, "attempts": res.Attempts})
}

// addLanceCatchupFlags adds the Lance-only flags of index catchup.
func addLanceCatchupFlags(cmd *cobra.Command) {
	cmd.Long = cmd.Short + "." + lanceCatchupHelp
	cmd.Flags().Bool("rebuild", false, "Lance: rebuild each lagging index into one segment instead of adding a delta")
	cmd.Flags().Int("max-segments", lindex.DefaultMaxSegments, "Lance: rebuild an index whose delta would give it more segments than this (negative: never)")
}
