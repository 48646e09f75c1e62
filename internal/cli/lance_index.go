package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
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
	o := index.Options{}
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
	res, err := index.CatchUp(cmd.Context(), h, o)
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
	cmd.Flags().Int("max-segments", index.DefaultMaxSegments, "Lance: rebuild an index whose delta would give it more segments than this (negative: never)")
}

// lanceRemapHelp is appended to index remap's help.
const lanceRemapHelp = `

On a Lance dataset, remap rewrites every btree and bitmap segment whose data may still hold row
addresses a version of the fragment-reuse index (__lance_frag_reuse) remaps: each gets a new
uuid, dataset_version = the version read, its fragment bitmap through the FRI, and loses the
rows the compactions dropped or the fully deleted fragments held (one CreateIndex per logical
index). Then the FRI is trimmed of the versions no index needs any more, or removed when none
is left (--no-trim skips this; index trim-fri does it alone).`

// runLanceRemap runs `index remap` when url is a Lance dataset.
func runLanceRemap(cmd *cobra.Command, e *env, url, names string) (handled bool, err error) {
	h, ok, done, err := openLanceHandle(cmd.Context(), e, url)
	if err != nil || !ok {
		return err != nil, err
	}
	defer done()
	o := index.RemapJobOptions{}
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			o.Indices = append(o.Indices, n)
		}
	}
	if o.NoTrim, err = cmd.Flags().GetBool("no-trim"); err != nil {
		return true, err
	}
	res, err := index.RemapIndexes(cmd.Context(), h, o)
	if err != nil {
		return true, err
	}
	version := uint64(0)
	if n := len(res.Versions); n > 0 {
		version = res.Versions[n-1]
	}
	return true, printJSON(e.stdout, map[string]any{"version": version, "read_version": res.ReadVersion, "operation": "index_remap",
		"fri_versions": res.FRIVersions, "indices": res.Indices, "skipped": res.Skipped, "trim": res.Trim, "commits": res.Commits})
}

// addLanceRemapFlags adds the Lance-only flags of index remap.
func addLanceRemapFlags(cmd *cobra.Command) {
	cmd.Long = cmd.Short + "." + lanceRemapHelp
	cmd.Flags().Bool("no-trim", false, "Lance: leave the fragment-reuse index as it is after the remaps")
}

// newIndexTrimFRICmd is `index trim-fri` (Lance datasets only).
func newIndexTrimFRICmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "trim-fri URL",
		Short: "Drop the fragment-reuse index versions no index needs any more (Lance)",
		Long: `Drop the fragment-reuse index versions no index needs any more (Lance).

A version is kept while some btree, bitmap or other non-system index may hold row addresses it
remaps: its fragment bitmap meets the version's old or removed fragments (followed through the
earlier versions), or it was moved onto the version's new fragments while its data predates the
version. The FRI is replaced by one with the kept versions, or removed when none is left.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, ok, done, err := openLanceHandle(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s is not a Lance dataset: trim-fri trims Lance's fragment-reuse index (index remap trims compactord's)", args[0])
			}
			defer done()
			tr, err := index.TrimFRI(cmd.Context(), h, index.RemapJobOptions{})
			if err != nil {
				return err
			}
			if tr == nil {
				return printJSON(e.stdout, map[string]any{"version": 0, "operation": "fri_trim", "committed": false})
			}
			return printJSON(e.stdout, map[string]any{"version": tr.Version, "operation": "fri_trim", "committed": true,
				"dropped": tr.Dropped, "kept": tr.Kept, "removed": tr.Removed, "attempts": tr.Attempts})
		},
	}
}

// runLanceLookup runs `index lookup` when url is a Lance dataset: the rows
// whose indexed column equals key, through the index's segments remapped
// by the fragment-reuse index (and a scan of what no segment covers unless
// indexOnly).
func runLanceLookup(cmd *cobra.Command, e *env, url, name, key string, version uint64, indexOnly, addrs bool) (handled bool, err error) {
	ctx := cmd.Context()
	b, ok, err := openLance(ctx, url)
	if err != nil || !ok {
		return err != nil, err
	}
	defer b.Close()
	var read *meta.ManifestFile
	if version == 0 {
		read, _, err = meta.ReadLatest(ctx, b)
	} else {
		var n meta.Naming
		if _, n, err = meta.Latest(ctx, b); err == nil {
			read, err = meta.ReadVersion(ctx, b, n, version)
		}
	}
	if err != nil {
		return true, err
	}
	res, err := index.Lookup(ctx, b, read, name, key, index.LookupOptions{IndexOnly: indexOnly})
	if err != nil {
		return true, err
	}
	return true, index.WriteRows(ctx, b, read, res.Addrs, e.stdout, addrs)
}
